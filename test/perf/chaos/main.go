// Command chaos (make chaos) runs a burst of TrainJobs on the local cluster
// with two manager replicas under leader election and, at random moments,
// SIGKILLs the leader several times, restarts the API server once, SIGKILLs and
// restarts etcd, and deletes a kwok node while pods run on it (their jobs'
// runtime restarts a JobSet whose pods are lost), then checks what a user
// would check afterwards:
//
//   - every TrainJob has exactly one JobSet (the same one all along) that it owns;
//   - every TrainJob is Complete (with -suspend: shows its Suspended condition);
//   - every job that had pods on the lost node shows the restart (status.restarts);
//   - no TrainJob's status went backwards (phase order Pending → Running →
//     Complete, except back to Pending after a restart; a condition once True
//     never turned False);
//   - no event storm: no job got the same event more than twice.
//
// It exits non-zero when any check fails, and writes what it saw as JSON.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/localcluster"
	"github.com/trainyard/trainyard/test/perf/harness"
)

const ns = "chaos"

type report struct {
	N              int        `json:"n"`
	Suspended      bool       `json:"suspended,omitempty"`
	ManagerArgs    []string   `json:"managerArgs,omitempty"`
	Kills          []kill     `json:"kills"`
	APIRestartAt   float64    `json:"apiServerRestartAt"`
	APIRestartSecs float64    `json:"apiServerRestartSeconds"`
	EtcdRestarts   []restart  `json:"etcdRestarts,omitempty"`
	NodeLosses     []nodeLoss `json:"nodeLosses,omitempty"`
	// Restarted lists the TrainJobs whose status.restarts is above 0 at the
	// end, and RestartEvents counts their Restarted events.
	Restarted     []string  `json:"restarted,omitempty"`
	RestartEvents int       `json:"restartEvents"`
	AllFinished   float64   `json:"allFinishedSeconds"`
	Complete      int       `json:"complete"` // with -suspend: jobs showing Suspended
	JobSets       int       `json:"jobSets"`
	Events        int       `json:"events"`
	Violations    []string  `json:"violations"`
	Started       time.Time `json:"started"`
	// SelfExits are when a replica exited on its own (it lost its lease) and
	// was started again.
	SelfExits []float64 `json:"selfExits,omitempty"`
	mu        sync.Mutex
}

type kill struct {
	At      float64 `json:"at"` // seconds after the first create
	Replica int     `json:"replica"`
	// Takeover is how long until a replica was leader again.
	Takeover float64 `json:"takeoverSeconds"`
}

func main() {
	var (
		n       = flag.Int("n", 1000, "TrainJobs")
		kills   = flag.Int("kills", 5, "times the leader is SIGKILLed")
		etcd    = flag.Int("etcd-restarts", 1, "times etcd is SIGKILLed and restarted")
		nodes   = flag.Int("node-losses", 1, "kwok nodes deleted while pods of the run are on them")
		window  = flag.Duration("window", 150*time.Second, "kills and the API server restart happen at random moments in this window after the first create")
		seed    = flag.Uint64("seed", uint64(time.Now().UnixNano()), "random seed (printed, to replay a run)")
		dir     = flag.String("state-dir", "bin/perf/chaos-cluster", "state directory of the local cluster")
		out     = flag.String("out", "bin/perf/chaos.json", "report file")
		timeout = flag.Duration("timeout", 40*time.Minute, "give up after this long")
		mgrArgs = flag.String("manager-args", "", "extra manager flags, space separated (e.g. shorter --leader-election-lease-duration)")
		suspend = flag.Bool("suspend", false, "submit the TrainJobs suspended: their JobSets are created (suspended) and their status written, but no pod runs and no node is lost; a job is done once it shows its Suspended condition. The scale point beyond what kwok and JobSet's one worker run on 2 cores (a 10k run of running jobs takes hours there)")
	)
	flag.Parse()
	if *suspend {
		*nodes = 0 // no pod runs: there is nothing on a node to lose
	}
	rep, err := run(*n, *kills, *etcd, *nodes, *window, *seed, *dir, *timeout, strings.Fields(*mgrArgs), *suspend)
	if rep != nil {
		if b, jerr := json.MarshalIndent(rep, "", "  "); jerr == nil {
			_ = os.MkdirAll(filepath.Dir(*out), 0o755)
			_ = os.WriteFile(*out, append(b, '\n'), 0o644)
		}
	}
	switch {
	case err != nil:
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	case len(rep.Violations) > 0:
		fmt.Fprintf(os.Stderr, "chaos: FAILED, %d violations (seed %d):\n  %s\n", len(rep.Violations), *seed, strings.Join(rep.Violations, "\n  "))
		os.Exit(1)
	}
	end := "Complete"
	if rep.Suspended {
		end = "Suspended"
	}
	fmt.Printf("chaos: OK (seed %d): %d TrainJobs, %d leader kills, API server restarted once, etcd %d times, %d nodes lost (%d jobs restarted, %d Restarted events); every job %s with exactly one JobSet, no status backwards, %d events\n",
		*seed, rep.N, len(rep.Kills), len(rep.EtcdRestarts), len(rep.NodeLosses), len(rep.Restarted), rep.RestartEvents, end, rep.Events)
}

func run(n, kills, etcdRestarts, nodeLosses int, window time.Duration, seed uint64, dir string, timeout time.Duration, managerArgs []string, suspend bool) (*report, error) {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, timeout)
	defer cancelT()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	logf("seed %d", seed)

	wd, _ := os.Getwd()
	repo, err := localcluster.FindRepoDir(wd)
	if err != nil {
		return nil, err
	}
	nodes := max(2, (n*2*3/2+499)/500)
	c, err := localcluster.Up(ctx, localcluster.Options{
		StateDir: dir, CPUNodes: nodes, PodsPerNode: 500, UntaintedNodes: true, DisableQPSLimits: true,
		ManagerReplicas: 2,
		ManagerArgs:     managerArgs,
		Runtimes:        []string{filepath.Join(repo, "runtimes", "torch-distributed.yaml")},
		Progress:        os.Stderr,
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		logf("stopping the cluster (logs in %s)", c.Logs())
		_ = c.Down()
	}()
	rc := c.RESTConfig()
	rc.QPS, rc.Burst = -1, 0
	rc.UserAgent = "trainyard-chaos/v0"
	cli, err := client.New(rc, client.Options{Scheme: localcluster.Scheme()})
	if err != nil {
		return nil, err
	}
	if err := harness.Namespace(ctx, cli, ns); err != nil {
		return nil, err
	}
	trainjobs, err := harness.Watch(ctx, c.RESTConfig(), harness.TrainJobs, ns)
	if err != nil {
		return nil, err
	}
	jobsets, err := harness.Watch(ctx, c.RESTConfig(), harness.JobSets, ns)
	if err != nil {
		return nil, err
	}

	if err := createRestartRuntime(ctx, cli, repo); err != nil {
		return nil, fmt.Errorf("creating the runtime %s: %w", restartRuntime, err)
	}

	// The faults, at random moments of the window, in time order.
	var faults []fault
	for i := 0; i < kills; i++ {
		faults = append(faults, fault{at: time.Duration(rng.Int64N(int64(window))), kind: faultKill})
	}
	faults = append(faults, fault{at: time.Duration(rng.Int64N(int64(window))), kind: faultAPIServer})
	for i := 0; i < etcdRestarts; i++ {
		faults = append(faults, fault{at: time.Duration(rng.Int64N(int64(window))), kind: faultEtcd})
	}
	for i := 0; i < nodeLosses; i++ {
		// Once pods run: in the second half of the window.
		faults = append(faults, fault{at: window/2 + time.Duration(rng.Int64N(int64(window/2))), kind: faultNode})
	}
	slices.SortFunc(faults, func(a, b fault) int { return int(a.at - b.at) })
	rep := &report{N: n, ManagerArgs: managerArgs, Started: time.Now(), Suspended: suspend}

	names := harness.Names("job", n)
	objs := make([]client.Object, n)
	for i, name := range names {
		tj := harness.TrainJob(ns, name, 2, "")
		tj.Spec.RuntimeRef.Name, tj.Spec.RuntimeRef.Kind = restartRuntime, ptr.To(trainer.TrainingRuntimeKind)
		if suspend {
			tj.Spec.Suspend = ptr.To(true)
		}
		objs[i] = tj
	}
	start := time.Now()
	submitted := make(chan error, 1)
	go func() {
		_, d, err := harness.Burst(ctx, cli, objs, harness.Load{Workers: 16})
		logf("%d TrainJobs created in %.1fs", n, d.Seconds())
		submitted <- err
	}()

	// As a Deployment's kubelet would, start again any replica that exits on
	// its own: a leader that cannot renew its lease in time (the API server
	// or etcd down longer than the renew deadline) gives up leading and exits.
	var replicas sync.Mutex
	kctx, stopKubelet := context.WithCancel(ctx)
	defer stopKubelet()
	go func() {
		for kctx.Err() == nil {
			replicas.Lock()
			is, err := c.RestartExitedManagerReplicas(kctx)
			replicas.Unlock()
			for _, i := range is {
				logf("%s exited on its own; started again at %.1fs", localcluster.ManagerReplica(i), time.Since(start).Seconds())
				rep.addSelfExit(time.Since(start).Seconds())
			}
			if err != nil && kctx.Err() == nil {
				logf("restarting an exited replica: %v", err)
			}
			sleepUntil(kctx, time.Now().Add(time.Second))
		}
	}()

	for _, f := range faults {
		sleepUntil(ctx, start.Add(f.at))
		err := f.run(ctx, c, cli, rep, start, &replicas)
		if err != nil {
			return rep, err
		}
	}
	if err := <-submitted; err != nil {
		return rep, fmt.Errorf("submitting: %w", err)
	}

	logf("faults done; waiting for every TrainJob to finish")
	// Wait as long as the run's -timeout allows, less a minute for the checks:
	// at 10 000 jobs the pods alone take most of an hour to run.
	deadline, _ := ctx.Deadline()
	wctx, cancelW := context.WithDeadline(ctx, deadline.Add(-time.Minute))
	end := harness.IsFinished
	if suspend {
		end = rep.done
	}
	done := trainjobs.WaitFor(wctx, names, end)
	cancelW()
	rep.AllFinished = time.Since(start).Seconds()
	logf("%d/%d TrainJobs finished after %.0fs", done, n, rep.AllFinished)
	time.Sleep(5 * time.Second) // late status writes and events, which must not regress anything
	check(ctx, cli, rep, names, trainjobs, jobsets)
	return rep, nil
}

// done says a job has reached the end the run waits for: Complete, or with
// -suspend its Suspended condition (suspended jobs never run).
func (r *report) done(s *harness.Seen) bool {
	if r.Suspended {
		return slices.Contains(s.Conditions, "Suspended")
	}
	return s.Final == "Complete"
}

func (r *report) addSelfExit(at float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.SelfExits = append(r.SelfExits, at)
}

// killLeader finds the leader among the replicas, SIGKILLs it, restarts it (as
// a Deployment would) and waits until some replica leads again.
func killLeader(ctx context.Context, c *localcluster.Cluster, start time.Time, replicas *sync.Mutex) (kill, error) {
	leader := -1
	for deadline := time.Now().Add(60 * time.Second); leader < 0 && time.Now().Before(deadline); {
		leader = currentLeader(c)
		if leader < 0 {
			time.Sleep(500 * time.Millisecond)
		}
	}
	if leader < 0 {
		return kill{}, fmt.Errorf("no manager replica became leader within 60s")
	}
	k := kill{At: time.Since(start).Seconds(), Replica: leader}
	logf("SIGKILL leader %s at %.1fs", localcluster.ManagerReplica(leader), k.At)
	// Kill and start again under the lock the restarter of exited replicas
	// takes, so that it does not start the killed replica itself.
	replicas.Lock()
	if err := c.StopManagerReplica(leader, syscall.SIGKILL); err != nil {
		replicas.Unlock()
		return k, err
	}
	t := time.Now()
	err := c.StartManagerReplica(ctx, leader)
	replicas.Unlock()
	if err != nil {
		return k, fmt.Errorf("restarting %s: %w", localcluster.ManagerReplica(leader), err)
	}
	for time.Since(t) < 90*time.Second && currentLeader(c) < 0 {
		time.Sleep(200 * time.Millisecond)
	}
	k.Takeover = time.Since(t).Seconds()
	logf("a leader again after %.1fs", k.Takeover)
	return k, nil
}

// currentLeader is the replica whose leader-election gauge is 1, or -1.
func currentLeader(c *localcluster.Cluster) int {
	for i := 0; i < c.ManagerReplicas(); i++ {
		m, err := harness.Scrape(c.ManagerMetricsURL(i))
		if err == nil && harness.Sum(m, "leader_election_master_status") >= 1 {
			return i
		}
	}
	return -1
}

// phaseRank orders TrainJob phases; a job's phase may only move forward.
var phaseRank = map[string]int{"Pending": 0, "Running": 1, "Complete": 2, "Failed": 2}

func check(ctx context.Context, cli client.Client, rep *report, names []string, trainjobs, jobsets *harness.Watcher) {
	violate := func(format string, args ...any) {
		if len(rep.Violations) < 200 {
			rep.Violations = append(rep.Violations, fmt.Sprintf(format, args...))
		}
	}
	// The final TrainJobs: how often each was restarted.
	restarts := map[string]int32{}
	var tjs trainer.TrainJobList
	if err := cli.List(ctx, &tjs, client.InNamespace(ns)); err != nil {
		violate("listing TrainJobs: %v", err)
	}
	for _, tj := range tjs.Items {
		if tj.Status.Restarts > 0 {
			restarts[tj.Name] = tj.Status.Restarts
			rep.Restarted = append(rep.Restarted, tj.Name)
		}
	}
	// A lost node takes every pod bound to it, finished ones too, so the
	// jobs that had pods there may show fewer nodes for a while (status counts
	// the pods it sees): only those may go back to Pending, besides restarted
	// ones. Unfinished pods make their Jobs fail, and their JobSets restart
	// (unless a pod finished in the moment before it was collected).
	lost := map[string]bool{}
	unfinished := 0
	for _, loss := range rep.NodeLosses {
		unfinished += loss.Unfinished
		for _, name := range loss.Jobs {
			lost[name] = true
		}
	}
	if unfinished > 0 && len(rep.Restarted) == 0 {
		violate("lost nodes had %d unfinished pods, but no TrainJob shows a restart", unfinished)
	}
	for _, name := range names {
		tj, ok := trainjobs.Get(name)
		if !ok {
			violate("%s: never seen", name)
			continue
		}
		switch {
		case rep.done(&tj):
			rep.Complete++
		case rep.Suspended:
			violate("%s: not Suspended (phases %v, conditions %v)", name, tj.Phases, tj.Conditions)
		default:
			violate("%s: not Complete (phases %v, conditions %v)", name, tj.Phases, tj.Conditions)
		}
		for i := 1; i < len(tj.Phases) && restarts[name] == 0 && !lost[name]; i++ {
			// A restarted job waits for its new pods again (Running →
			// Pending is the truth then); any other job only moves forward.
			if phaseRank[tj.Phases[i]] < phaseRank[tj.Phases[i-1]] {
				violate("%s: phase went backwards: %v", name, tj.Phases)
				break
			}
		}
		if len(tj.Regressions) > 0 {
			violate("%s: conditions turned from True to not True: %v", name, tj.Regressions)
		}
		js, ok := jobsets.Get(name)
		switch {
		case !ok:
			violate("%s: no JobSet ever seen", name)
		case len(js.UIDs) != 1:
			violate("%s: %d different JobSets seen under its name", name, len(js.UIDs))
		}
	}
	var list jobsetv1alpha2.JobSetList
	if err := cli.List(ctx, &list, client.InNamespace(ns)); err != nil {
		violate("listing JobSets: %v", err)
	}
	rep.JobSets = len(list.Items)
	owned := map[string]int{}
	for _, js := range list.Items {
		for _, o := range js.OwnerReferences {
			if o.Kind == "TrainJob" && o.Controller != nil && *o.Controller {
				owned[o.Name]++
			}
		}
	}
	for _, name := range names {
		if owned[name] != 1 {
			violate("%s: owns %d JobSets", name, owned[name])
		}
	}
	if len(list.Items) != len(names) {
		violate("%d JobSets for %d TrainJobs", len(list.Items), len(names))
	}

	// Events: the new events API folds repeats into a series; count both.
	var evs eventsv1.EventList
	if err := cli.List(ctx, &evs, client.InNamespace(ns)); err != nil {
		violate("listing events: %v", err)
	}
	perJobReason := map[string]int{}
	for _, e := range evs.Items {
		if e.Regarding.Kind != "TrainJob" {
			continue
		}
		cnt := 1
		if e.Series != nil {
			cnt = int(e.Series.Count)
		}
		rep.Events += cnt
		perJobReason[e.Regarding.Name+" "+e.Reason] += cnt
		if e.Reason == "Restarted" {
			rep.RestartEvents += cnt
		}
	}
	keys := make([]string, 0, len(perJobReason))
	for k := range perJobReason {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if perJobReason[k] > 2 {
			violate("event storm: %s sent %d times", k, perJobReason[k])
		}
	}
	for _, name := range rep.Restarted {
		if perJobReason[name+" Restarted"] == 0 {
			violate("%s: status.restarts %d, but no Restarted event", name, restarts[name])
		}
	}
}

func sleepUntil(ctx context.Context, t time.Time) {
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(t)):
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s chaos: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
