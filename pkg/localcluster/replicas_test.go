package localcluster

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// fakeReplica is a manager replica's webhook port, which answers each
// connection with the replica's index, and its /readyz.
type fakeReplica struct {
	webhook net.Listener
	health  *httptest.Server
	ready   atomic.Bool
}

func newFakeReplica(t *testing.T, i int) *fakeReplica {
	t.Helper()
	r := &fakeReplica{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.webhook = l
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = conn.Write([]byte(strconv.Itoa(i)))
			_ = conn.Close()
		}
	}()
	r.health = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !r.ready.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(func() {
		_ = r.webhook.Close()
		r.health.Close()
	})
	return r
}

func listenPort(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestWebhookProxy checks that the webhook proxy of several manager replicas
// sends connections, as a Service does, only to ready replicas, skips a ready
// one that refuses them (killed since the last poll), and only then falls
// back to one that accepts but is not ready.
func TestWebhookProxy(t *testing.T) {
	rs := []*fakeReplica{newFakeReplica(t, 0), newFakeReplica(t, 1)}
	c := &Cluster{}
	for _, r := range rs {
		c.replicas = append(c.replicas, replicaPorts{Webhook: listenPort(t, r.webhook.Addr().String()), Health: listenPort(t, r.health.Listener.Addr().String())})
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ready := make([]atomic.Bool, len(rs))
	done := make(chan struct{})
	go c.pollReplicasReady(ready, done)
	go func() {
		c.serveProxy(l, ready)
		close(done)
	}()
	t.Cleanup(func() { _ = l.Close() })

	// answers returns which replicas answered n connections through the proxy.
	answers := func(n int) map[string]int {
		got := map[string]int{}
		for range n {
			conn, err := net.Dial("tcp", l.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(conn)
			_ = conn.Close()
			got[string(b)]++
		}
		return got
	}
	settle := func() { time.Sleep(3 * readyPoll) }

	// Only replica 1 is ready: it gets every connection.
	rs[1].ready.Store(true)
	settle()
	if got := answers(10); got["1"] != 10 {
		t.Errorf("replica 1 ready, 0 not: connections went to %v", got)
	}
	// Both ready: both get connections.
	rs[0].ready.Store(true)
	settle()
	if got := answers(10); got["0"] == 0 || got["1"] == 0 {
		t.Errorf("both ready: connections went to %v", got)
	}
	// Replica 0 killed (it refuses connections) before the poller noticed:
	// replica 1 gets them all.
	_ = rs[0].webhook.Close()
	if got := answers(10); got["1"] != 10 {
		t.Errorf("replica 0 killed: connections went to %v", got)
	}
	// No replica ready: one that accepts gets them anyway.
	rs[1].ready.Store(false)
	settle()
	if got := answers(5); got["1"] != 5 {
		t.Errorf("no replica ready, replica 1 accepting: connections went to %v", got)
	}
}
