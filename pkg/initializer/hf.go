package initializer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
)

// hfSource fetches the files of a Hugging Face hub repository at revision main
// through the hub's HTTP API: the file list from
// /api/{models,datasets}/<repo>/tree/main?recursive=true (paginated with Link
// headers), each file from /<repo>/resolve/main/<file> (datasets:
// /datasets/<repo>/resolve/main/<file>). As upstream's initializers do, a
// dataset's repo is the host and the first path segment (hf://org/name/...),
// a model's the host and the whole path.
//
// The token goes only to the hub's own origin (HF_ENDPOINT's scheme, host and
// port): a download the hub redirects elsewhere (its CDN) is fetched without
// it (scopedClient), and a Link naming another origin is not followed.
type hfSource struct {
	c        *Config
	endpoint string
	origin   *url.URL
	repo     string
	dataset  bool
}

func newHFSource(c *Config, u *url.URL) (*hfSource, error) {
	p := strings.Trim(u.Path, "/")
	if u.Host == "" || p == "" {
		return nil, fmt.Errorf("STORAGE_URI %q: want hf://org/name", c.StorageURI)
	}
	repo := u.Host + "/" + p
	if c.Kind == Dataset {
		repo = u.Host + "/" + strings.SplitN(p, "/", 2)[0]
	}
	ep := strings.TrimSuffix(c.HFEndpoint, "/")
	origin, err := url.Parse(ep)
	if err != nil || origin.Host == "" {
		return nil, fmt.Errorf("HF_ENDPOINT %q: want a URL such as %s", c.HFEndpoint, DefaultHFEndpoint)
	}
	return &hfSource{c: c, endpoint: ep, origin: origin, repo: repo, dataset: c.Kind == Dataset}, nil
}

func (s *hfSource) describe() string {
	kind := "model"
	if s.dataset {
		kind = "dataset"
	}
	return fmt.Sprintf("hf://%s (%s repository at %s)", s.repo, kind, s.endpoint)
}

func (s *hfSource) get(ctx context.Context, u, what string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	if s.c.AccessToken != "" && sameOrigin(req.URL, s.origin) {
		req.Header.Set("Authorization", "Bearer "+s.c.AccessToken)
	}
	resp, err := s.c.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	var e struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	msg := fmt.Sprintf("%s: HTTP %d", what, resp.StatusCode)
	if e.Error != "" {
		msg += ": " + e.Error
	}
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound:
		// The hub answers 401 for a repository that does not exist as for a
		// private one without a token.
		hint := ""
		if s.c.AccessToken == "" {
			hint = "; if it is private or gated, set ACCESS_TOKEN (through spec.initializer secretRef)"
		}
		return nil, permanent(fmt.Errorf("%s (repository %s not found or not accessible%s)", msg, s.repo, hint))
	case http.StatusTooManyRequests, http.StatusRequestTimeout:
		return nil, errors.New(msg)
	}
	if resp.StatusCode/100 == 4 {
		return nil, permanent(errors.New(msg))
	}
	return nil, errors.New(msg)
}

type hfEntry struct {
	Type string `json:"type"`
	Path string `json:"path"`
	Size int64  `json:"size"`
	LFS  *struct {
		Size int64 `json:"size"`
	} `json:"lfs"`
}

var linkNext = regexp.MustCompile(`<([^>]+)>\s*;\s*rel="?next"?`)

func (s *hfSource) list(ctx context.Context) ([]object, error) {
	kind := "models"
	if s.dataset {
		kind = "datasets"
	}
	next := s.endpoint + "/api/" + kind + "/" + s.repo + "/tree/main?recursive=true"
	var objs []object
	for next != "" {
		resp, err := s.get(ctx, next, "listing "+s.describe())
		if err != nil {
			return nil, err
		}
		var entries []hfEntry
		err = json.NewDecoder(resp.Body).Decode(&entries)
		_ = resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("listing %s: decoding the response: %w", s.describe(), err)
		}
		for _, e := range entries {
			if e.Type != "file" {
				continue
			}
			size := e.Size
			if e.LFS != nil {
				size = e.LFS.Size
			}
			objs = append(objs, object{rel: e.Path, size: size, ref: e.Path})
		}
		next = ""
		if m := linkNext.FindStringSubmatch(resp.Header.Get("Link")); m != nil {
			u, err := resp.Request.URL.Parse(m[1])
			if err != nil {
				return nil, fmt.Errorf("listing %s: the next page's Link %q: %w", s.describe(), m[1], err)
			}
			if !sameOrigin(u, s.origin) {
				return nil, permanent(fmt.Errorf("listing %s: the next page's Link names another host (%s), not followed: the listing and the token stay with %s",
					s.describe(), origin(u), origin(s.origin)))
			}
			next = u.String()
		}
	}
	if len(objs) == 0 {
		return nil, permanent(fmt.Errorf("%s: the repository has no files at revision main", s.describe()))
	}
	return objs, nil
}

func (s *hfSource) open(ctx context.Context, o object) (io.ReadCloser, error) {
	prefix := s.endpoint + "/"
	if s.dataset {
		prefix += "datasets/"
	}
	u := prefix + s.repo + "/resolve/main/" + uriEncode(o.ref, false)
	resp, err := s.get(ctx, u, "fetching "+o.rel+" of hf://"+s.repo)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}
