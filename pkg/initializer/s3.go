package initializer

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"
)

// s3Source lists and fetches the objects under s3://bucket/prefix from any
// S3-compatible endpoint, with path-style requests (endpoint/bucket/key), which
// every S3 implementation serves. Requests are signed with SigV4 when
// credentials are given (credentials.go), anonymous otherwise.
type s3Source struct {
	c        *Config
	endpoint *url.URL
	bucket   string
	prefix   string // without leading or trailing "/"
	region   string
	creds    credentialSource
}

func newS3Source(c *Config, u *url.URL) (*s3Source, error) {
	if u.Host == "" {
		return nil, fmt.Errorf("STORAGE_URI %q: want s3://bucket/prefix", c.StorageURI)
	}
	region := c.Region
	if region == "auto" {
		// "auto" is what S3-compatible stores such as R2 accept; AWS wants a real
		// region, and us-east-1 is where unqualified endpoints sign.
		region = "us-east-1"
	}
	ep := c.Endpoint
	if ep == "" {
		ep = "https://s3." + region + ".amazonaws.com"
	}
	if !strings.Contains(ep, "://") {
		ep = "https://" + ep
	}
	epURL, err := url.Parse(ep)
	if err != nil {
		return nil, fmt.Errorf("ENDPOINT %q: %w", c.Endpoint, err)
	}
	creds, err := credentialsFor(c, region)
	if err != nil {
		return nil, err
	}
	return &s3Source{c: c, endpoint: epURL, bucket: u.Host, prefix: strings.Trim(u.Path, "/"), region: region, creds: creds}, nil
}

func (s *s3Source) describe() string {
	return "s3://" + s.bucket + "/" + s.prefix + " at " + s.endpoint.String()
}

// request builds a signed GET of bucket/key with a query.
func (s *s3Source) request(ctx context.Context, key string, query url.Values) (*http.Request, error) {
	u := *s.endpoint
	u.Path = strings.TrimSuffix(u.Path, "/") + "/" + s.bucket
	if key != "" {
		u.Path += "/" + key
	}
	u.RawPath = strings.TrimSuffix(s.endpoint.EscapedPath(), "/") + "/" + uriEncode(s.bucket, true)
	if key != "" {
		u.RawPath += "/" + uriEncode(key, false)
	}
	u.RawQuery = query.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	creds, ok, err := s.creds.get(ctx)
	if err != nil {
		return nil, err
	}
	if ok {
		signV4(req, creds, s.region, time.Now())
	}
	return req, nil
}

type listResult struct {
	Contents []struct {
		Key  string `xml:"Key"`
		Size int64  `xml:"Size"`
	} `xml:"Contents"`
	IsTruncated           bool   `xml:"IsTruncated"`
	NextContinuationToken string `xml:"NextContinuationToken"`
}

type s3Error struct {
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

// do runs a request and turns an S3 error response into an error: 4xx are
// permanent (a missing bucket or key, denied credentials), 5xx and network
// errors are retried.
func (s *s3Source) do(req *http.Request, what string) (*http.Response, error) {
	resp, err := s.c.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var e s3Error
	_ = xml.Unmarshal(body, &e)
	msg := fmt.Sprintf("%s: HTTP %d", what, resp.StatusCode)
	if e.Code != "" {
		msg += " " + e.Code
		if e.Message != "" {
			msg += ": " + e.Message
		}
	}
	switch e.Code {
	case "NoSuchBucket":
		msg = fmt.Sprintf("%s: bucket %q does not exist at %s", what, s.bucket, s.endpoint)
	case "NoSuchKey":
		msg = fmt.Sprintf("%s: no such object", what)
	}
	err = errors.New(msg)
	if resp.StatusCode/100 == 4 && resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusRequestTimeout {
		return nil, permanent(err)
	}
	return nil, err
}

// list lists the objects under the prefix recursively (ListObjectsV2, page by
// page). The prefix is a directory: s3://b/data holds data/x but not data2/x;
// a prefix that names one object fetches that object.
func (s *s3Source) list(ctx context.Context) ([]object, error) {
	var objs []object
	token := ""
	for {
		q := url.Values{"list-type": {"2"}}
		if s.prefix != "" {
			q.Set("prefix", s.prefix)
		}
		if token != "" {
			q.Set("continuation-token", token)
		}
		req, err := s.request(ctx, "", q)
		if err != nil {
			return nil, err
		}
		resp, err := s.do(req, "listing s3://"+s.bucket+"/"+s.prefix)
		if err != nil {
			return nil, err
		}
		var res listResult
		err = xml.NewDecoder(resp.Body).Decode(&res)
		_ = resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("listing s3://%s/%s: decoding the response: %w", s.bucket, s.prefix, err)
		}
		for _, c := range res.Contents {
			if strings.HasSuffix(c.Key, "/") {
				continue // a "directory" marker
			}
			var rel string
			switch {
			case s.prefix == "":
				rel = c.Key
			case c.Key == s.prefix:
				rel = path.Base(c.Key)
			case strings.HasPrefix(c.Key, s.prefix+"/"):
				rel = strings.TrimPrefix(c.Key, s.prefix+"/")
			default:
				continue // a sibling such as data2/ for prefix data
			}
			objs = append(objs, object{rel: rel, size: c.Size, ref: c.Key})
		}
		if !res.IsTruncated || res.NextContinuationToken == "" {
			break
		}
		token = res.NextContinuationToken
	}
	if len(objs) == 0 {
		return nil, permanent(fmt.Errorf("s3://%s/%s: no such object or prefix at %s", s.bucket, s.prefix, s.endpoint))
	}
	return objs, nil
}

func (s *s3Source) open(ctx context.Context, o object) (io.ReadCloser, error) {
	req, err := s.request(ctx, o.ref, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.do(req, "fetching s3://"+s.bucket+"/"+o.ref)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}
