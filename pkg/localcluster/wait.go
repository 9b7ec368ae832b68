package localcluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// poll runs check every 200ms until it returns true, an error, or ReadyTimeout passes.
func (c *Cluster) poll(ctx context.Context, what string, check func() (bool, string, error)) error {
	ctx, cancel := context.WithTimeout(ctx, c.o.ReadyTimeout)
	defer cancel()
	var last string
	for {
		ok, msg, err := check()
		if err != nil && ctx.Err() == nil {
			last = err.Error()
		} else if ok {
			return nil
		} else {
			last = msg
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out waiting for %s: %s", what, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitHTTP polls url until it answers 200, the process exits, or the timeout passes.
func (c *Cluster) waitHTTP(ctx context.Context, p Process, url string, hc *http.Client) error {
	if hc == nil {
		hc = &http.Client{Timeout: 2 * time.Second}
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.ReadyTimeout)
	defer cancel()
	var last string
	for {
		if c.sup.exited(p) {
			return fmt.Errorf("%s exited while starting; end of %s:\n%s", p.Name, p.Log, tail(p.Log, 30))
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := hc.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready at %s after %s (%s); end of %s:\n%s", p.Name, url, c.o.ReadyTimeout, last, p.Log, tail(p.Log, 30))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
