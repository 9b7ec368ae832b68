package initializer

import (
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DialTimeout bounds connecting to a host; TLS handshakes and the wait for a
// response's headers have the same bound.
const DialTimeout = 30 * time.Second

// newTransport is the default transport of the initializer's HTTP client,
// with the dialer whose DialContext it uses.
func newTransport() (*http.Transport, *net.Dialer) {
	d := &net.Dialer{Timeout: DialTimeout, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   DialTimeout,
		ResponseHeaderTimeout: DialTimeout,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
	}, d
}

// credentialHeaders are what a request may carry that is for its own host
// only: the hub's bearer token, SigV4's signature and session token.
var credentialHeaders = []string{"Authorization", "X-Amz-Security-Token", "Cookie"}

// origin is a URL's scheme, host and port (the default port spelled out).
func origin(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		switch scheme {
		case "https":
			port = "443"
		case "http":
			port = "80"
		}
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

func sameOrigin(a, b *url.URL) bool { return origin(a) == origin(b) }

// scopedClient is c whose redirects carry the credential headers only to the
// origin of the first request. Go's client forwards Authorization to a
// redirect on the same host name (whatever the port or scheme) or a
// subdomain of it (huggingface.co to cdn-lfs.huggingface.co), and other
// headers, X-Amz-Security-Token included, everywhere.
func scopedClient(c *http.Client) *http.Client {
	scoped := *c
	next := c.CheckRedirect
	scoped.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if !sameOrigin(req.URL, via[0].URL) {
			for _, h := range credentialHeaders {
				req.Header.Del(h)
			}
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return &scoped
}
