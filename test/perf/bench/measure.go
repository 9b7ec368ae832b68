package main

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainyard/trainyard/pkg/localcluster"
	"github.com/trainyard/trainyard/test/perf/harness"
)

// settle is how long after the last job finished the active window still runs
// (the last status writes and events), before the rest window starts.
const settle = 10 * time.Second

type snapshot struct {
	at      time.Time
	cpu     map[string]float64 // component → CPU seconds
	metrics map[string]float64
	// apiserver are the API server's metrics (watchers it closed).
	apiserver map[string]float64
}

func (b *bench) snapshot() snapshot {
	s := snapshot{at: time.Now(), cpu: map[string]float64{}}
	for _, p := range b.c.Processes() {
		if st, err := harness.ReadProc(p.PID); err == nil {
			s.cpu[p.Name] += st.CPUSeconds
		}
	}
	if m, err := harness.Scrape(b.metricsURL); err == nil {
		s.metrics = m
	} else {
		logf("%v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if m, err := harness.ScrapeAPIServer(ctx, b.c.RESTConfig()); err == nil {
		s.apiserver = m
	} else {
		logf("%v", err)
	}
	return s
}

// managerRSS is the manager's resident set now (0 if it cannot be read).
func (b *bench) managerRSS() int64 {
	st, err := harness.ReadProc(b.managerPID)
	if err != nil {
		return 0
	}
	return st.RSSBytes
}

// rssSampler records the manager's largest resident set while it runs.
func (b *bench) rssSampler() (stop func() int64) {
	var mu sync.Mutex
	var peak int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			rss := b.managerRSS()
			mu.Lock()
			peak = max(peak, rss)
			mu.Unlock()
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 {
		close(done)
		wg.Wait()
		return peak
	}
}

// submitter makes a phase's jobs: when each was issued (by name), and how long
// the burst took.
type submitter func(ctx context.Context) (map[string]time.Time, time.Duration, error)

// burst is the submitter that creates objs under load, one create per job.
func (b *bench) burst(objs []client.Object, load harness.Load) submitter {
	return func(ctx context.Context) (map[string]time.Time, time.Duration, error) {
		return harness.Burst(ctx, b.cli, objs, load)
	}
}

// measure submits the phase's jobs and measures the phase until every job
// finished and the rest window passed. jobsets watches the phase's JobSets,
// finished what marks a job finished (the TrainJobs, or the JobSets of the raw
// and pair phases).
func (b *bench) measure(ctx context.Context, phase, ns string, names []string, submit submitter, jobsets, finished *harness.Watcher) (*Phase, error) {
	ph := &Phase{Name: phase, Jobs: len(names)}
	if _, err := b.flushAudit(ctx); err != nil { // start counting from here
		return nil, err
	}
	before := b.snapshot()
	startRSS := b.managerRSS()
	stopRSS := b.rssSampler()

	logf("phase %s: submitting %d jobs with %d clients", phase, len(names), b.cfg.load.Workers)
	profiles := b.prof.start(ctx, phase)
	start := time.Now()
	issued, took, err := submit(ctx)
	if err != nil {
		stopRSS()
		return nil, err
	}
	ph.SubmitSeconds = took.Seconds()

	wctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	n := jobsets.WaitFor(wctx, names, harness.Exists)
	cancel()
	if n < len(names) {
		stopRSS()
		return nil, fmt.Errorf("only %d of %d JobSets appeared", n, len(names))
	}
	var created, running []time.Duration
	var lastSeen, lastRunning time.Time
	for _, name := range names {
		s, _ := jobsets.Get(name)
		created = append(created, s.First.Sub(issued[name]))
		if s.First.After(lastSeen) {
			lastSeen = s.First
		}
	}
	ph.AllJobSetsSeconds = lastSeen.Sub(start).Seconds()
	ph.Samples = &Samples{}
	for i, name := range names {
		s, _ := jobsets.Get(name)
		ph.Samples.LatencyMillis = append(ph.Samples.LatencyMillis, round2(float64(created[i])/float64(time.Millisecond)))
		ph.Samples.JobSetSeenSeconds = append(ph.Samples.JobSetSeenSeconds, round2(s.First.Sub(start).Seconds()))
	}
	sort.Float64s(ph.Samples.LatencyMillis)
	sort.Float64s(ph.Samples.JobSetSeenSeconds)
	ph.JobSetsPerSecond = float64(len(names)) / ph.AllJobSetsSeconds
	ph.Profiles = profiles()
	ph.LatencyMillis = percentiles(created)
	logf("phase %s: all JobSets exist after %.2fs; waiting for the jobs to finish", phase, ph.AllJobSetsSeconds)

	wait := 30 * time.Minute
	if b.cfg.suspend || b.cfg.bare {
		wait = 0 // suspended jobs never run, nor any job on a bare API server
	}
	wctx, cancel = context.WithTimeout(ctx, wait)
	jobsets.WaitFor(wctx, names, harness.IsRunning)
	cancel()
	for _, name := range names {
		if s, ok := jobsets.Get(name); ok && !s.Running.IsZero() {
			running = append(running, s.Running.Sub(issued[name]))
			if s.Running.After(lastRunning) {
				lastRunning = s.Running
			}
		}
	}
	if len(running) > 0 {
		ph.AllRunningSeconds = lastRunning.Sub(start).Seconds()
		ph.RunningLatencyMillis = percentiles(running)
	}

	// Suspended jobs never finish; their end is every status written (the
	// Suspended condition), so that the rest window starts at rest.
	done := harness.IsFinished
	if b.cfg.suspend && !clientOnly(phase) {
		wait, done = 30*time.Minute, func(s *harness.Seen) bool { return slices.Contains(s.Conditions, "Suspended") }
	}
	if b.cfg.bare && !clientOnly(phase) {
		// On a bare API server a job's end is its first status write.
		wait, done = 30*time.Minute, func(s *harness.Seen) bool { return len(s.Phases) > 0 }
	}
	wctx, cancel = context.WithTimeout(ctx, wait)
	n = finished.WaitFor(wctx, names, done)
	cancel()
	ph.AllFinishedSeconds = time.Since(start).Seconds()
	ph.Finished = n
	for _, name := range names {
		if s, ok := finished.Get(name); ok && s.Final == "Failed" {
			ph.Failed++
		}
	}
	if n < len(names) {
		logf("phase %s: only %d of %d jobs finished", phase, n, len(names))
	}
	time.Sleep(settle)
	active, err := b.flushAudit(ctx)
	if err != nil {
		stopRSS()
		return nil, err
	}
	mid := b.snapshot()
	ph.ManagerCPUSeconds = mid.cpu[localcluster.Manager] - before.cpu[localcluster.Manager]
	rest := b.cfg.rest
	if clientOnly(phase) {
		rest = 0 // no controller of ours is involved: nothing to count
	}
	logf("phase %s: all finished after %.0fs; counting writes at rest for %s", phase, ph.AllFinishedSeconds, rest)
	time.Sleep(rest)
	restEvents, err := b.flushAudit(ctx)
	if err != nil {
		stopRSS()
		return nil, err
	}
	after := b.snapshot()
	ph.ManagerPeakRSSMiB = mib(stopRSS())
	if restRSS := b.managerRSS(); restRSS > 0 && startRSS > 0 {
		ph.ManagerRestRSSMiB = mib(restRSS)
		ph.ManagerKiBPerJob = round2(float64(restRSS-startRSS) / 1024 / float64(len(names)))
	}

	ph.CPUSeconds = map[string]float64{}
	for k, v := range after.cpu {
		ph.CPUSeconds[k] = round2(v - before.cpu[k])
	}
	ph.ManagerCPUSeconds = round2(ph.ManagerCPUSeconds)
	ph.Reconciles = int(harness.Sum(after.metrics, "controller_runtime_reconcile_total", `controller="trainjob"`) -
		harness.Sum(before.metrics, "controller_runtime_reconcile_total", `controller="trainjob"`))
	ph.ReconcileErrors = int(harness.Sum(after.metrics, "controller_runtime_reconcile_errors_total", `controller="trainjob"`) -
		harness.Sum(before.metrics, "controller_runtime_reconcile_errors_total", `controller="trainjob"`))
	// Watches the API server closed on its side (a watcher too slow to keep
	// up with the events: its client must re-watch, or list again).
	ph.TerminatedWatchers = int(harness.Sum(after.apiserver, "apiserver_terminated_watchers_total") -
		harness.Sum(before.apiserver, "apiserver_terminated_watchers_total"))
	b.countRequests(ph, ns, names, active, restEvents, after.at.Sub(mid.at))
	return ph, nil
}

// countRequests fills the request counts of a phase from the audit events of
// its active window and of its rest window (which lasted restFor).
func (b *bench) countRequests(ph *Phase, ns string, names []string, active, rest []harness.AuditEvent, restFor time.Duration) {
	per := harness.Count{}
	jobsetCreated := map[string]time.Time{}
	for i := range active {
		e := &active[i]
		if !e.From(managerAgent) {
			continue
		}
		if e.Code() == 409 {
			ph.Conflicts++
		}
		if e.Resource() == "leases" {
			continue
		}
		switch e.Verb {
		case "watch":
			ph.ManagerWatches++
		case "list":
			ph.ManagerLists++
		}
		per.Add(e)
		if e.Verb == "create" && e.Resource() == "jobsets" && e.Namespace() == ns && e.Code() < 300 {
			jobsetCreated[e.Name()] = e.RequestReceived
		}
	}
	ph.ManagerRequestsPerJob = map[string]float64{}
	for k, v := range per {
		ph.ManagerRequestsPerJob[k] = round2(float64(v) / float64(len(names)))
	}
	if len(jobsetCreated) > 0 {
		before := 0
		for i := range active {
			e := &active[i]
			if !e.From(managerAgent) || !e.IsWrite() || e.Namespace() != ns {
				continue
			}
			if t, ok := jobsetCreated[jobOf(e)]; ok && !e.RequestReceived.After(t) {
				before++
			}
		}
		ph.ManagerWritesPerJobToJobSet = round2(float64(before) / float64(len(names)))
		writes := 0
		for k, v := range per {
			if isWriteKey(k) {
				writes += v
			}
		}
		ph.ManagerWritesPerJob = round2(float64(writes) / float64(len(names)))
	}
	mins := restFor.Minutes()
	if mins < 0.1 {
		return // no rest window
	}
	restByKey := harness.Count{}
	for i := range rest {
		e := &rest[i]
		if !e.IsWrite() {
			continue
		}
		switch {
		case e.From(managerAgent) && e.Resource() == "leases":
			ph.RestManagerLeaseWritesPerMin++
		case e.From(managerAgent):
			ph.RestManagerWritesPerMin++
			restByKey.Add(e)
		case e.Resource() != "leases":
			ph.RestOtherWritesPerMin++
		}
	}
	ph.RestManagerWritesPerMin = round2(ph.RestManagerWritesPerMin / mins)
	ph.RestManagerLeaseWritesPerMin = round2(ph.RestManagerLeaseWritesPerMin / mins)
	ph.RestOtherWritesPerMin = round2(ph.RestOtherWritesPerMin / mins)
	if len(restByKey) > 0 {
		keys := make([]string, 0, len(restByKey))
		for k := range restByKey {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		ph.RestManagerWrites = keys
	}
}

func isWriteKey(k string) bool {
	e := harness.AuditEvent{Verb: k[:indexSpace(k)]}
	return e.IsWrite()
}

func indexSpace(s string) int {
	for i, r := range s {
		if r == ' ' {
			return i
		}
	}
	return len(s)
}

func percentiles(ds []time.Duration) Millis {
	p := harness.Percentiles(ds, 50, 95, 99, 100)
	ms := func(d time.Duration) float64 { return round2(float64(d) / float64(time.Millisecond)) }
	return Millis{P50: ms(p[0]), P95: ms(p[1]), P99: ms(p[2]), Max: ms(p[3])}
}

// clientOnly phases are made by the bench's own client alone (and, for
// kueue-jobset, Kueue's and JobSet's controllers): the JobSets mark
// their jobs' ends, and the manager has nothing to do.
func clientOnly(phase string) bool {
	return phase == "raw" || phase == "pair" || phase == "kueue-jobset"
}

func round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }

func mib(b int64) float64 { return round2(float64(b) / (1 << 20)) }

// pace describes a submission rate for the log and the report.
func pace(perSecond float64) string {
	if perSecond <= 0 {
		return "unpaced"
	}
	return fmt.Sprintf("paced to %g jobs/s", perSecond)
}
