package initializer

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder is a server that records the credential headers it receives and
// answers with body.
type recorder struct {
	body string
	mu   sync.Mutex
	seen []string // "Authorization=...;X-Amz-Security-Token=..." per request
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.seen = append(r.seen, fmt.Sprintf("%s %s Authorization=%q X-Amz-Security-Token=%q", req.Method, req.URL.Path,
		req.Header.Get("Authorization"), req.Header.Get("X-Amz-Security-Token")))
	r.mu.Unlock()
	fmt.Fprint(w, r.body)
}

func (r *recorder) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

// oneFileHub is a hub with one dataset file whose download redirects to
// redirect, and whose tree API links a next page at link (when set).
func oneFileHub(t *testing.T, token string, redirect, link func() string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":"Invalid credentials in Authorization header"}`)
			return
		}
		if strings.HasPrefix(r.URL.Path, "/api/datasets/org/data/tree/main") {
			if link != nil {
				w.Header().Set("Link", "<"+link()+`>; rel="next"`)
			}
			_ = json.NewEncoder(w).Encode([]map[string]any{{"type": "file", "path": "train.csv", "size": 5}})
			return
		}
		if r.URL.Path == "/datasets/org/data/resolve/main/train.csv" {
			http.Redirect(w, r, redirect(), http.StatusFound)
			return
		}
		t.Errorf("hub: unexpected %s", r.URL)
		w.WriteHeader(http.StatusNotFound)
	}))
}

// byName dials hub.test and cdn.hub.test (a subdomain, as the hub's CDN is)
// at the given servers.
func byName(addrs map[string]string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, _ := net.SplitHostPort(addr)
		return (&net.Dialer{}).DialContext(ctx, network, addrs[host])
	}}}
}

// TestHFTokenStaysWithTheHub: the hub redirects a download to another host
// (another port of the same address, or a subdomain of the hub, both of
// which Go's client would send the Authorization header to): the file is
// fetched there without the token.
func TestHFTokenStaysWithTheHub(t *testing.T) {
	for _, tc := range []struct {
		name   string
		byName bool
	}{{"another port of the hub's address", false}, {"a subdomain of the hub", true}} {
		t.Run(tc.name, func(t *testing.T) {
			cdn := &recorder{body: "a,b\n\n"}
			cdnSrv := httptest.NewServer(cdn)
			defer cdnSrv.Close()
			cdnURL := cdnSrv.URL
			if tc.byName {
				cdnURL = "http://cdn.hub.test"
			}
			hub := oneFileHub(t, "hf_secret", func() string { return cdnURL + "/blobs/train.csv" }, nil)
			defer hub.Close()
			c := Config{Kind: Dataset, StorageURI: "hf://org/data", HFEndpoint: hub.URL, AccessToken: "hf_secret",
				Dest: filepath.Join(t.TempDir(), "dataset")}
			if tc.byName {
				c.HFEndpoint = "http://hub.test"
				c.HTTP = byName(map[string]string{"hub.test": hub.Listener.Addr().String(), "cdn.hub.test": cdnSrv.Listener.Addr().String()})
			}
			if log, err := fetch(t, c); err != nil {
				t.Fatalf("%v\n%s", err, log)
			}
			if got := tree(t, c.Dest)["train.csv"]; got != "a,b\n\n" {
				t.Errorf("train.csv = %q", got)
			}
			for _, r := range cdn.requests() {
				if strings.Contains(r, "hf_secret") {
					t.Errorf("the redirect target got the token: %s", r)
				}
			}
			if len(cdn.requests()) != 1 {
				t.Errorf("the redirect target got %d requests, want 1", len(cdn.requests()))
			}
		})
	}
}

// TestHFLinkToAnotherHostNotFollowed: a Link to the next page on another
// host is refused; that host gets nothing, least of all the token.
func TestHFLinkToAnotherHostNotFollowed(t *testing.T) {
	other := &recorder{body: "[]"}
	otherSrv := httptest.NewServer(other)
	defer otherSrv.Close()
	hub := oneFileHub(t, "hf_secret", func() string { return "/unused" },
		func() string { return otherSrv.URL + "/api/datasets/org/data/tree/main?cursor=2" })
	defer hub.Close()
	c := Config{Kind: Dataset, StorageURI: "hf://org/data", HFEndpoint: hub.URL, AccessToken: "hf_secret",
		Dest: filepath.Join(t.TempDir(), "dataset")}
	_, err := fetch(t, c)
	if err == nil || !strings.Contains(err.Error(), "the next page's Link names another host ("+origin(mustParse(t, otherSrv.URL))+"), not followed") {
		t.Errorf("error %v, want the Link refused", err)
	}
	if got := other.requests(); len(got) != 0 {
		t.Errorf("the other host got %v", got)
	}
}

// TestS3SessionToken: with AWS_SESSION_TOKEN every request carries it as
// X-Amz-Security-Token, among the signed headers.
func TestS3SessionToken(t *testing.T) {
	var mu sync.Mutex
	var seen []*http.Request
	f := &fakeS3{bucket: "bucket", objects: map[string]string{"data/a.bin": "aaaa"}, flaky: map[string]bool{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Clone(context.Background()))
		mu.Unlock()
		f.ServeHTTP(w, r)
	}))
	defer srv.Close()
	env := map[string]string{"STORAGE_URI": "s3://bucket/data", "ENDPOINT": srv.URL, "REGION": "eu-west-1",
		"ACCESS_KEY_ID": "ASIATEMP", "SECRET_ACCESS_KEY": "secret", "AWS_SESSION_TOKEN": "session/token+1=="}
	c := FromEnv(Dataset, func(k string) string { return env[k] })
	c.Dest = filepath.Join(t.TempDir(), "dataset")
	if log, err := fetch(t, c); err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	if len(seen) != 2 {
		t.Fatalf("%d requests, want a list and a get", len(seen))
	}
	for _, r := range seen {
		auth := r.Header.Get("Authorization")
		if got := r.Header.Get("X-Amz-Security-Token"); got != "session/token+1==" {
			t.Errorf("%s: X-Amz-Security-Token %q", r.URL, got)
		}
		if !strings.Contains(auth, "Credential=ASIATEMP/") || !strings.Contains(auth, "SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token,") {
			t.Errorf("%s: Authorization %q does not sign the token", r.URL, auth)
		}
	}
}

// TestS3RedirectDropsCredentials: an S3 endpoint that redirects a GET to
// another origin: the signature and the session token stay behind.
func TestS3RedirectDropsCredentials(t *testing.T) {
	other := &recorder{body: "aaaa"}
	otherSrv := httptest.NewServer(other)
	defer otherSrv.Close()
	f := &fakeS3{bucket: "bucket", objects: map[string]string{"data/a.bin": "aaaa"}, flaky: map[string]bool{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bucket/data/a.bin" {
			http.Redirect(w, r, otherSrv.URL+"/node-2/data/a.bin", http.StatusTemporaryRedirect)
			return
		}
		f.ServeHTTP(w, r)
	}))
	defer srv.Close()
	env := map[string]string{"STORAGE_URI": "s3://bucket/data", "ENDPOINT": srv.URL,
		"ACCESS_KEY_ID": "ASIATEMP", "SECRET_ACCESS_KEY": "secret", "AWS_SESSION_TOKEN": "tok"}
	c := FromEnv(Dataset, func(k string) string { return env[k] })
	c.Dest = filepath.Join(t.TempDir(), "dataset")
	if log, err := fetch(t, c); err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	want := []string{`GET /node-2/data/a.bin Authorization="" X-Amz-Security-Token=""`}
	if got := other.requests(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the redirect target got %q, want %q", got, want)
	}
}

// TestDialTimeout: the default client's transport dials with DialTimeout
// (30 s), through the dialer newTransport returns.
func TestDialTimeout(t *testing.T) {
	c := Config{Kind: Dataset}
	if err := c.defaults(); err != nil {
		t.Fatal(err)
	}
	tr, ok := c.HTTP.Transport.(*http.Transport)
	if !ok || tr.DialContext == nil || tr.TLSHandshakeTimeout != 30*time.Second || tr.ResponseHeaderTimeout != 30*time.Second {
		t.Fatalf("default transport %#v: want a DialContext and 30s timeouts", c.HTTP.Transport)
	}
	tr, d := newTransport()
	if d.Timeout != 30*time.Second {
		t.Errorf("dial timeout %s, want 30s", d.Timeout)
	}
	// The transport dials with that dialer: with its timeout cut to nothing,
	// even a listening local address times out.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	d.Timeout = time.Nanosecond
	if conn, err := tr.DialContext(context.Background(), "tcp", ln.Addr().String()); err == nil {
		_ = conn.Close()
		t.Error("dialled with a 1ns timeout: the transport does not use the dialer")
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Errorf("error %v, want a timeout", err)
	}
}

func mustParse(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
