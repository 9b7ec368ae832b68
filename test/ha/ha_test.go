// Package ha checks that Trainyard's admission webhooks stay available while
// the manager's leader dies. Its test runs a local cluster (pkg/localcluster) with
// two manager replicas under leader election, as the chart and the kustomize
// base deploy them, keeps creating TrainJobs through the webhooks, SIGKILLs
// the leader several times, and fails on any create that does not go through.
//
// The API server reaches the replicas as through the webhook Service: the
// cluster's webhook proxy sends each connection to a ready replica, and a
// killed one refuses connections (pkg/localcluster/replicas.go).
package ha

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/localcluster"
	"github.com/trainyard/trainyard/test/e2eutil"
	"github.com/trainyard/trainyard/test/perf/harness"
)

const (
	// kills is how many times the leader is stopped: SIGKILL but the last
	// time, SIGTERM.
	kills = 4
	// interval is the pace of the create loop.
	interval = 50 * time.Millisecond
	// down is how long a killed replica stays down before it is started
	// again, as a Deployment's kubelet would restart it: long enough for the
	// other replica to serve alone for a while as the loop runs.
	down = 5 * time.Second
	// rejectEvery: every rejectEvery-th create names a runtime that does not
	// exist, which the validating webhook must reject, so that the loop
	// proves the webhooks answer, not just that the API server admits.
	rejectEvery = 10
	// runtimeName is the runtime the TrainJobs use.
	runtimeName = "torch-distributed"
)

// TestWebhooksSurviveLeaderKill creates a TrainJob every 50 ms (server-side
// dry runs: both webhooks are called, nothing is stored or reconciled) and
// stops the leading manager replica four times while the loop runs: three
// SIGKILLs, as a crash or an OOM kill, and one SIGTERM, as an eviction or a
// rolling update, each time starting it again 5 s later (as the Deployment's
// kubelet would) and waiting for a leader. Every create must be answered by
// the webhooks: the valid ones admitted and defaulted (the mutating webhook
// stamps runtimePatches[].time), the invalid ones rejected by the validating
// webhook. Any other outcome (a webhook call that failed: connection refused
// or reset, timeout, cache not started) is an error; it wants none.
//
// A SIGKILL loses the webhook call that the killed process is answering at
// that instant, on a real cluster as here: the API server does not retry a
// webhook call whose connection breaks. So each SIGKILL is sent between two
// creates (no call in flight), and what it checks is what comes after: the
// API server's connection to the dead replica, the proxy's and the restarted
// replica's readiness. The SIGTERM is sent at any moment: the webhook server
// finishes the calls in flight before the process exits.
//
// The local cluster's binaries must be built (make cluster-tools): without
// them the test fails.
func TestWebhooksSurviveLeaderKill(t *testing.T) {
	repo, err := localcluster.FindRepoDir(".")
	if err != nil {
		t.Fatal(err)
	}
	o := localcluster.Options{
		CPUNodes:        1,
		GPUNodes:        0,
		ManagerReplicas: 2,
		Runtimes:        []string{filepath.Join(repo, "runtimes", runtimeName+".yaml")},
		// Failover within 8 s rather than 15 s, to keep the test short, but
		// not so tight that a leader on a machine busy with other tests loses
		// its lease on its own.
		ManagerArgs: []string{"--leader-election-lease-duration=8s", "--leader-election-renew-deadline=6s", "--leader-election-retry-period=1s"},
	}
	missing, err := localcluster.MissingBinaries(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Fatalf("local cluster binaries missing (run `make cluster-tools`): %s", strings.Join(missing, ", "))
	}
	c, err := e2eutil.UpCluster("ha", o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs of every component are in %s", c.Logs())
		}
		if err := c.Down(); err != nil {
			t.Errorf("stopping the cluster: %v", err)
		}
		if !t.Failed() {
			_ = os.RemoveAll(c.StateDir())
		}
	})
	cli := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := e2eutil.NewNamespace(t, cli, "ha-", time.Minute)

	// Both replicas serve before the first kill: one leads.
	leader := waitLeader(t, c, time.Minute)
	t.Logf("replica %d leads", leader)

	var (
		mu       sync.Mutex // guards res
		inFlight sync.Mutex // held by the loop during each create
		res      results
		stop     = make(chan struct{})
		stopOnce sync.Once
		loopDone = make(chan struct{})
	)
	// Stops the loop also when a step below fails the test.
	stopLoop := func() {
		stopOnce.Do(func() { close(stop) })
		<-loopDone
	}
	defer stopLoop()
	go func() {
		defer close(loopDone)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
			inFlight.Lock()
			start := time.Now()
			err := create(rctx, cli, ns, i)
			inFlight.Unlock()
			rcancel()
			mu.Lock()
			res.add(i, start, err)
			mu.Unlock()
		}
	}()

	type window struct{ from, to time.Time }
	var downs []window
	time.Sleep(2 * time.Second)
	for k := range kills {
		leader := waitLeader(t, c, 30*time.Second)
		sig, sigName := syscall.SIGKILL, "SIGKILL"
		if k == kills-1 {
			sig, sigName = syscall.SIGTERM, "SIGTERM"
		}
		killed := time.Now()
		var err error
		if sig == syscall.SIGKILL {
			// Between two creates; StopManagerReplica returns once the
			// process is gone.
			inFlight.Lock()
			err = c.StopManagerReplica(leader, sig)
			inFlight.Unlock()
		} else {
			err = c.StopManagerReplica(leader, sig)
		}
		if err != nil {
			t.Fatalf("kill %d: %s to replica %d: %v", k+1, sigName, leader, err)
		}
		time.Sleep(down)
		if err := c.StartManagerReplica(ctx, leader); err != nil {
			t.Fatalf("kill %d: starting replica %d again: %v", k+1, leader, err)
		}
		back := time.Now()
		downs = append(downs, window{killed, back})
		next := waitLeader(t, c, 30*time.Second)
		t.Logf("kill %d: %s to leader %d; it was ready again after %.1fs; replica %d leads", k+1, sigName, leader, back.Sub(killed).Seconds(), next)
		time.Sleep(2 * time.Second)
	}
	stopLoop()

	mu.Lock()
	defer mu.Unlock()
	for k, w := range downs {
		n := res.between(w.from, w.to)
		t.Logf("kill %d: %d creates while the killed leader was down (%.1fs)", k+1, n, w.to.Sub(w.from).Seconds())
		// The other replica alone must have answered a good part of them
		// (about 100 at the pace of the loop).
		if n < int(down/interval)/2 {
			t.Errorf("kill %d: only %d creates while the leader was down; the loop did not keep its pace", k+1, n)
		}
	}
	t.Logf("%d creates (%d admitted, %d rejected by the validating webhook), %d errors, in %d leader stops; latency max %s",
		res.total, res.admitted, res.rejected, len(res.errs), kills, res.maxLatency.Round(time.Millisecond))
	for _, e := range res.errs {
		t.Errorf("create %d at %s: %v", e.i, e.at.Format("15:04:05.000"), e.err)
	}
}

// create server-side dry-run creates TrainJob i of the loop: every
// rejectEvery-th one names a runtime that does not exist and must be rejected
// by the validating webhook; the others must be admitted, with the time that
// the mutating webhook stamps on runtime patches. It returns an error for any
// other outcome.
func create(ctx context.Context, cli client.Client, ns string, i int) error {
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	j := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("ha-%05d", i)},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: runtimeName},
			Trainer: &trainer.Trainer{
				NumNodes:         ptr.To(int32(2)),
				Command:          []string{"torchrun", "train.py"},
				ResourcesPerNode: &corev1.ResourceRequirements{Requests: res, Limits: res},
			},
			RuntimePatches: []trainer.RuntimePatch{{
				Manager: "ha.trainyard.io/test",
				TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{
					Metadata: &metav1.ObjectMeta{Labels: map[string]string{"ha.trainyard.io/create": fmt.Sprint(i)}},
				}},
			}},
		},
	}
	reject := i%rejectEvery == rejectEvery-1
	if reject {
		j.Spec.RuntimeRef.Name = "no-such-runtime"
	}
	err := cli.Create(ctx, j, client.DryRunAll)
	switch {
	case reject && err == nil:
		return errors.New("a TrainJob of a runtime that does not exist was admitted")
	case reject && strings.Contains(err.Error(), "denied the request") && strings.Contains(err.Error(), "no-such-runtime"):
		// "admission webhook "<name>" denied the request: runtime ... not
		// found": the validating webhook's answer (the local cluster renames
		// the webhooks apart from JobSet's and Kueue's).
		return errRejected
	case reject:
		return fmt.Errorf("want a rejection by the validating webhook: %w", err)
	case err != nil:
		return err
	case j.Spec.RuntimePatches[0].Time == nil:
		return errors.New("admitted without runtimePatches[0].time: the mutating webhook was not called")
	}
	return nil
}

var errRejected = errors.New("rejected as it should be")

type createErr struct {
	i   int
	at  time.Time
	err error
}

// results count the loop's creates.
type results struct {
	total, admitted, rejected int
	starts                    []time.Time
	errs                      []createErr
	maxLatency                time.Duration
}

func (r *results) add(i int, start time.Time, err error) {
	r.total++
	r.starts = append(r.starts, start)
	r.maxLatency = max(r.maxLatency, time.Since(start))
	switch {
	case err == nil:
		r.admitted++
	case errors.Is(err, errRejected):
		r.rejected++
	default:
		r.errs = append(r.errs, createErr{i, start, err})
	}
}

// between counts the creates started from from to to.
func (r *results) between(from, to time.Time) int {
	n := 0
	for _, s := range r.starts {
		if !s.Before(from) && s.Before(to) {
			n++
		}
	}
	return n
}

// waitLeader returns the replica whose leader-election gauge is 1, waiting up
// to timeout for one.
func waitLeader(t *testing.T, c *localcluster.Cluster, timeout time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		for i := range c.ManagerReplicas() {
			m, err := harness.Scrape(c.ManagerMetricsURL(i))
			if err == nil && harness.Sum(m, "leader_election_master_status") >= 1 {
				return i
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no manager replica leads within %s", timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
