package statusserver

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// serve runs s's http.Server (timeouts, header bound) on httptest's TLS.
func serve(t *testing.T, s *Server) *httptest.Server {
	t.Helper()
	ts := httptest.NewUnstartedServer(nil)
	ts.Config = s.HTTPServer()
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return ts
}

// TestServerHeaderLimit: headers beyond MaxHeaderBytes are refused (Go's
// default would read 1 MiB of them).
func TestServerHeaderLimit(t *testing.T) {
	ts := serve(t, &Server{Handler: (&Handler{}).ServeMux()})
	req, err := http.NewRequest(http.MethodPost, ts.URL+Path("ns", "mnist"), strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Padding", strings.Repeat("a", 64<<10))
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("64 KiB of headers: %d, want 431", resp.StatusCode)
	}
}

// TestServerTimeouts: the defaults are set, and a client that sends its
// headers slowly (or a TLS handshake that never ends) is cut off after
// ReadHeaderTimeout.
func TestServerTimeouts(t *testing.T) {
	srv := (&Server{}).HTTPServer()
	if srv.ReadHeaderTimeout != DefaultReadHeaderTimeout || srv.ReadTimeout != DefaultReadTimeout ||
		srv.WriteTimeout != DefaultWriteTimeout || srv.IdleTimeout != DefaultIdleTimeout || srv.MaxHeaderBytes != MaxHeaderBytes {
		t.Errorf("server %+v: timeouts or header bound not the defaults", srv)
	}
	ts := serve(t, &Server{Handler: (&Handler{}).ServeMux(), ReadHeaderTimeout: 200 * time.Millisecond})
	for _, c := range []string{"no TLS handshake", "no request", "partial headers"} {
		var conn net.Conn
		var err error
		if c == "no TLS handshake" {
			conn, err = net.Dial("tcp", ts.Listener.Addr().String())
		} else {
			conn, err = tls.Dial("tcp", ts.Listener.Addr().String(), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a test server
		}
		if err != nil {
			t.Fatal(err)
		}
		if c == "partial headers" {
			if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\n", Path("ns", "mnist")); err != nil {
				t.Fatal(err)
			}
		}
		begin := time.Now()
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = io.ReadAll(conn) // returns when the server closes the connection
		if d := time.Since(begin); err != nil || d > 2*time.Second {
			t.Errorf("%s: connection closed after %v (%v), want about 200ms", c, d, err)
		}
		_ = conn.Close()
	}
}
