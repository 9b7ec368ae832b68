package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Several manager replicas (Options.ManagerReplicas) run as in a Deployment with
// leader election: every replica serves the webhooks, one reconciles. The
// webhook configurations point at a TCP proxy on Ports.ManagerWebhook that, like
// a Service, forwards each connection to a ready replica: one whose /readyz
// answered 200 when last polled (every readyPoll), as the endpoints of a
// Service list only ready pods. A replica that refuses the connection (killed
// since) is skipped; when no ready replica accepts, any replica that accepts
// gets it (the first replica, before the poller has seen it ready).

// ManagerReplica is the component name of manager replica i; replica 0 is Manager.
func ManagerReplica(i int) string {
	if i == 0 {
		return Manager
	}
	return fmt.Sprintf("%s-%d", Manager, i)
}

// replicaPorts are one manager replica's listening ports (Pprof is used
// with Options.Profiling only).
type replicaPorts struct {
	Webhook, Metrics, Health, Pprof int
}

// setUpReplicas chooses the replicas' ports and, for more than one, starts the
// webhook proxy.
func (c *Cluster) setUpReplicas() error {
	n := max(c.o.ManagerReplicas, 1)
	c.replicas = []replicaPorts{{c.ports.ManagerWebhook, c.ports.ManagerMetrics, c.ports.ManagerHealth, c.ports.ManagerPprof}}
	if n == 1 {
		return nil
	}
	if c.o.Detach {
		return errors.New("cluster: ManagerReplicas > 1 needs a cluster that does not detach (the webhook proxy runs in the calling process)")
	}
	// Replica 0 needs a webhook port of its own (the proxy listens on
	// ManagerWebhook); every other replica needs all four.
	extra, err := freePortList(4*n - 3)
	if err != nil {
		return err
	}
	c.replicas[0].Webhook = extra[0]
	for i := 1; i < n; i++ {
		c.replicas = append(c.replicas, replicaPorts{extra[4*i-3], extra[4*i-2], extra[4*i-1], extra[4*i]})
	}
	l, err := net.Listen("tcp", loopback(c.ports.ManagerWebhook))
	if err != nil {
		return fmt.Errorf("webhook proxy: %w", err)
	}
	c.proxy = l
	ready := make([]atomic.Bool, n)
	done := make(chan struct{})
	go c.pollReplicasReady(ready, done)
	go func() {
		c.serveProxy(l, ready)
		close(done)
	}()
	return nil
}

// readyPoll is how often the webhook proxy polls the replicas' /readyz.
const readyPoll = 100 * time.Millisecond

// pollReplicasReady records in ready[i] whether replica i's /readyz answers
// 200, every readyPoll, until done is closed.
func (c *Cluster) pollReplicasReady(ready []atomic.Bool, done <-chan struct{}) {
	hc := &http.Client{Timeout: 500 * time.Millisecond}
	tick := time.NewTicker(readyPoll)
	defer tick.Stop()
	for {
		for i := range ready {
			ok := false
			if resp, err := hc.Get(fmt.Sprintf("http://%s/readyz", loopback(c.replicas[i].Health))); err == nil {
				ok = resp.StatusCode == http.StatusOK
				_ = resp.Body.Close()
			}
			ready[i].Store(ok)
		}
		select {
		case <-done:
			return
		case <-tick.C:
		}
	}
}

// serveProxy forwards each connection to the ready replicas in turn, skipping
// those that refuse it (killed since the last poll), and else to any replica
// that accepts it.
func (c *Cluster) serveProxy(l net.Listener, ready []atomic.Bool) {
	var next atomic.Uint32
	for {
		in, err := l.Accept()
		if err != nil {
			return // closed by Down
		}
		go func() {
			defer func() { _ = in.Close() }()
			start := int(next.Add(1))
			var out net.Conn
			for _, wantReady := range []bool{true, false} {
				for k := range c.replicas {
					i := (start + k) % len(c.replicas)
					if ready[i].Load() != wantReady {
						continue
					}
					if out, err = net.DialTimeout("tcp", loopback(c.replicas[i].Webhook), time.Second); err == nil {
						break
					}
				}
				if out != nil {
					break
				}
			}
			if out == nil {
				return
			}
			defer func() { _ = out.Close() }()
			var wg sync.WaitGroup
			wg.Add(2)
			pipe := func(dst, src net.Conn) {
				defer wg.Done()
				_, _ = io.Copy(dst, src)
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
			}
			go pipe(out, in)
			go pipe(in, out)
			wg.Wait()
		}()
	}
}

// ManagerMetricsURL is the metrics endpoint of manager replica i: plain HTTP,
// as the cluster starts the manager with --metrics-secure=false.
func (c *Cluster) ManagerMetricsURL(i int) string {
	return fmt.Sprintf("http://%s/metrics", loopback(c.replicas[i].Metrics))
}

// ManagerPprofURL is the base URL of manager replica i's /debug/pprof
// endpoints (plain HTTP on loopback); served only with Options.Profiling.
func (c *Cluster) ManagerPprofURL(i int) string {
	return "http://" + loopback(c.replicas[i].Pprof)
}

// ManagerReplicas is the number of manager replicas.
func (c *Cluster) ManagerReplicas() int { return len(c.replicas) }

// StopManagerReplica sends sig to manager replica i and waits until it is gone
// (SIGKILL after 10s for other signals).
func (c *Cluster) StopManagerReplica(i int, sig syscall.Signal) error {
	p, ok := c.sup.find(ManagerReplica(i))
	if !ok {
		return fmt.Errorf("manager replica %d is not running", i)
	}
	return c.sup.stop(p, sig, stopGrace)
}

// StartManagerReplica starts manager replica i and waits for its /readyz.
func (c *Cluster) StartManagerReplica(ctx context.Context, i int) error {
	name := ManagerReplica(i)
	if _, ok := c.sup.find(name); ok {
		return fmt.Errorf("%s is already running", name)
	}
	p, err := c.sup.start(name, c.managerArgs(i), false)
	if err != nil {
		return err
	}
	return c.waitHTTP(ctx, p, fmt.Sprintf("http://%s/readyz", loopback(c.replicas[i].Health)), nil)
}

// RestartExitedManagerReplicas starts again every manager replica whose
// process exited on its own (e.g. a leader that lost its lease exits), as a
// Deployment's kubelet restarts a container, and returns their indexes.
func (c *Cluster) RestartExitedManagerReplicas(ctx context.Context) ([]int, error) {
	var restarted []int
	for i := range c.replicas {
		p, ok := c.sup.find(ManagerReplica(i))
		if !ok || !c.sup.exited(p) {
			continue
		}
		if err := c.sup.stop(p, syscall.SIGKILL, 0); err != nil {
			return restarted, fmt.Errorf("forgetting exited %s: %w", p.Name, err)
		}
		if err := c.StartManagerReplica(ctx, i); err != nil {
			return restarted, err
		}
		restarted = append(restarted, i)
	}
	return restarted, nil
}

// RestartAPIServer stops the API server (SIGTERM) and starts it again with the
// same flags and etcd, as an upgrade or a crash would; it returns once it is ready.
func (c *Cluster) RestartAPIServer(ctx context.Context) error {
	p, ok := c.sup.find(APIServer)
	if !ok {
		return errors.New("the API server is not running")
	}
	if err := c.sup.stop(p, syscall.SIGTERM, stopGrace); err != nil {
		return err
	}
	api, err := c.sup.start(APIServer, c.apiserverArgs(), false)
	if err != nil {
		return err
	}
	hc, err := c.httpsClient(true)
	if err != nil {
		return err
	}
	return c.waitHTTP(ctx, api, fmt.Sprintf("https://%s/readyz", c.apiserverAddr()), hc)
}

// RestartEtcd stops etcd (SIGKILL: a crash, not a clean stop) and starts it
// again on the same data, waiting until it is healthy. The API server stays up
// and answers 5xx meanwhile, as it does when its etcd goes away.
func (c *Cluster) RestartEtcd(ctx context.Context) error {
	p, ok := c.sup.find(Etcd)
	if !ok {
		return errors.New("etcd is not running")
	}
	if err := c.sup.stop(p, syscall.SIGKILL, stopGrace); err != nil {
		return err
	}
	etcd, err := c.sup.start(Etcd, c.etcdArgs(), false)
	if err != nil {
		return err
	}
	return c.waitHTTP(ctx, etcd, fmt.Sprintf("http://%s/health", loopback(c.ports.EtcdClient)), nil)
}

// freePortList returns n distinct free loopback ports.
func freePortList(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	out := make([]int, n)
	for i := range out {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free loopback port: %w", err)
		}
		ls = append(ls, l)
		out[i] = l.Addr().(*net.TCPAddr).Port
	}
	return out, nil
}
