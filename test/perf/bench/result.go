package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
)

// Result is one bench run.
type Result struct {
	Label       string   `json:"label"`
	Date        string   `json:"date"`
	Machine     string   `json:"machine"`
	N           int      `json:"n"`
	NodesPerJob int      `json:"nodesPerJob"`
	Workers     int      `json:"workers"`
	PerSecond   float64  `json:"perSecond,omitempty"` // submissions paced to this rate (0: unpaced)
	KwokNodes   int      `json:"kwokNodes"`
	Suspended   bool     `json:"suspended,omitempty"` // TrainJobs submitted suspended: no pods ran
	Bare        bool     `json:"bare,omitempty"`      // bare API server: no webhooks, no other controllers, no pods
	ManagerArgs []string `json:"managerArgs,omitempty"`
	// KueueConcurrency is the workers of Kueue's TrainJob and JobSet
	// integrations (0: Kueue's default, one).
	KueueConcurrency int     `json:"kueueConcurrency,omitempty"`
	Phases           []Phase `json:"phases"`
	// RatioToLimit is Trainyard's JobSets/s over the raw phase's (1 = as fast
	// as a plain client creating the JobSets itself).
	RatioToLimit float64 `json:"ratioToLimit,omitempty"`
	// RatioToPair is Trainyard's JobSets/s over the pair phase's: a plain client
	// creating each TrainJob and then its JobSet, through the same webhooks.
	RatioToPair float64 `json:"ratioToPair,omitempty"`
	// RatioToKueueJobSets is the kueue phase's admission rate (jobs over the
	// time until the last JobSet ran unsuspended) over the kueue-jobset
	// phase's: plain JobSets through the same queue and quota.
	RatioToKueueJobSets float64 `json:"ratioToKueueJobSets,omitempty"`
	ManagerPeakRSSMiB   float64 `json:"managerPeakRSSMiB"`
	// GoBenchmarks are the pipeline's Go benchmarks (go test -bench -benchmem).
	GoBenchmarks []string `json:"goBenchmarks,omitempty"`
}

// Phase holds one phase's numbers.
type Phase struct {
	Name string `json:"name"`
	Jobs int    `json:"jobs"`
	// PerSecond is the paced phase's submission rate (0: unpaced).
	PerSecond     float64 `json:"perSecond,omitempty"`
	SubmitSeconds float64 `json:"submitSeconds"` // creating the N objects
	// AllJobSetsSeconds: from the first create to the last JobSet seen (watch).
	AllJobSetsSeconds float64 `json:"allJobSetsSeconds"`
	JobSetsPerSecond  float64 `json:"jobSetsPerSecond"`
	// LatencyMillis: from each object's create request to its JobSet seen.
	LatencyMillis Millis `json:"latencyMillis"`
	// AllRunningSeconds and RunningLatencyMillis: to the JobSet seen unsuspended
	// (Kueue's admission included in the kueue phase).
	AllRunningSeconds    float64 `json:"allRunningSeconds"`
	RunningLatencyMillis Millis  `json:"runningLatencyMillis"`
	AllFinishedSeconds   float64 `json:"allFinishedSeconds"`
	Finished             int     `json:"finished"`
	Failed               int     `json:"failed"`
	// OwnerRetries (pair phase): JobSet creates retried because JobSet's
	// webhook had not seen the owning TrainJob yet.
	OwnerRetries int `json:"ownerRetries,omitempty"`

	// The manager's requests (audit log, user agent trainyard-manager) from the
	// first create until 10 s after the last job finished, per job, by
	// "verb resource" (leader-election leases left out).
	ManagerRequestsPerJob       map[string]float64 `json:"managerRequestsPerJob,omitempty"`
	ManagerWritesPerJob         float64            `json:"managerWritesPerJob"`
	ManagerWritesPerJobToJobSet float64            `json:"managerWritesPerJobToJobSet"`
	Conflicts                   int                `json:"conflicts"`
	// ManagerWatches are the manager's watches that ended during the phase
	// (the audit log records a watch when it ends; its informer then watches
	// again), ManagerLists its list requests (with its informers synced
	// before, each is a relist). TerminatedWatchers counts the watches the API
	// server closed because the watcher could not keep up (every client's).
	ManagerWatches     int `json:"managerWatches"`
	ManagerLists       int `json:"managerLists"`
	TerminatedWatchers int `json:"terminatedWatchers"`
	Reconciles         int `json:"reconciles"`
	ReconcileErrors    int `json:"reconcileErrors"`

	// Writes per minute in the rest window.
	RestManagerWritesPerMin      float64  `json:"restManagerWritesPerMin"`
	RestManagerWrites            []string `json:"restManagerWrites,omitempty"`
	RestManagerLeaseWritesPerMin float64  `json:"restManagerLeaseWritesPerMin"`
	RestOtherWritesPerMin        float64  `json:"restOtherWritesPerMin"`

	ManagerCPUSeconds float64            `json:"managerCPUSeconds"` // first create → active window end
	ManagerPeakRSSMiB float64            `json:"managerPeakRSSMiB"` // largest RSS sampled in the phase
	ManagerRestRSSMiB float64            `json:"managerRestRSSMiB"` // RSS at the end of the rest window, every job's objects cached
	ManagerKiBPerJob  float64            `json:"managerKiBPerJob"`  // (rest RSS − RSS before the first create) / jobs
	CPUSeconds        map[string]float64 `json:"cpuSeconds"`        // every component, whole phase
	// Profiles are the CPU profiles taken from the start of the burst (-profile).
	Profiles []string `json:"profiles,omitempty"`

	// Samples are the per-job numbers behind the percentiles, for the plots;
	// written to samples.json, not result.json (which the docs embed).
	Samples *Samples `json:"-"`
}

// Samples are one phase's per-job measurements, each sorted ascending.
type Samples struct {
	// LatencyMillis: each job's create request → its JobSet seen.
	LatencyMillis []float64 `json:"latencyMillis"`
	// JobSetSeenSeconds: when each job's JobSet was seen, from the phase's start.
	JobSetSeenSeconds []float64 `json:"jobSetSeenSeconds"`
}

// Millis are latency percentiles in milliseconds.
type Millis struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

func (r *Result) phase(name string) *Phase {
	for i := range r.Phases {
		if r.Phases[i].Name == name {
			return &r.Phases[i]
		}
	}
	return nil
}

func (r *Result) derive() {
	raw, pair, ty := r.phase("raw"), r.phase("pair"), r.phase("trainyard")
	if raw != nil && ty != nil && raw.JobSetsPerSecond > 0 {
		r.RatioToLimit = round2(ty.JobSetsPerSecond / raw.JobSetsPerSecond)
	}
	if pair != nil && ty != nil && pair.JobSetsPerSecond > 0 {
		r.RatioToPair = round2(ty.JobSetsPerSecond / pair.JobSetsPerSecond)
	}
	if kq, anchor := r.phase("kueue"), r.phase("kueue-jobset"); kq != nil && anchor != nil && kq.AllRunningSeconds > 0 && anchor.AllRunningSeconds > 0 {
		r.RatioToKueueJobSets = round2(anchor.AllRunningSeconds / kq.AllRunningSeconds)
	}
}

// Markdown renders the run as the tables docs/performance.md shows.
func (r *Result) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Run `%s` on %s, %s: %d jobs per phase, %d nodes each, submitted by %d parallel clients (%s); %d kwok nodes.",
		r.Label, r.Date[:10], r.Machine, r.N, r.NodesPerJob, r.Workers, pace(r.PerSecond), r.KwokNodes)
	if r.Suspended {
		b.WriteString(" TrainJobs submitted **suspended** (JobSets created, no pods run; not waited for).")
	}
	if r.Bare {
		b.WriteString(" **Bare** API server: no webhooks, no other controllers (JobSets created, never run; a TrainJob is done at its first status write).")
	}
	if r.KueueConcurrency > 0 {
		fmt.Fprintf(&b, " Kueue's TrainJob and JobSet integrations with %d workers each.", r.KueueConcurrency)
	}
	if len(r.ManagerArgs) > 0 {
		fmt.Fprintf(&b, " Manager flags: `%s`.", strings.Join(r.ManagerArgs, " "))
	}
	b.WriteString("\n\n")
	if r.RatioToPair > 0 {
		fmt.Fprintf(&b, "**Trainyard's rate is %.2f× the pair limit** (a plain client creating each TrainJob and then its JobSet, through the same webhooks, in the same run).", r.RatioToPair)
		if r.RatioToLimit > 0 {
			fmt.Fprintf(&b, " Against JobSets alone (raw): %.2f×.", r.RatioToLimit)
		}
		b.WriteString("\n\n")
	} else if r.RatioToLimit > 0 {
		fmt.Fprintf(&b, "**Trainyard's rate is %.2f× the limit** (a plain client creating the same JobSets in the same run).\n\n", r.RatioToLimit)
	}
	if r.RatioToKueueJobSets > 0 {
		fmt.Fprintf(&b, "**Through Kueue, Trainyard admits at %.2f× the rate of plain JobSets** (the kueue-jobset phase: the same quota, Kueue's own JobSet integration; rate = jobs over the time until the last one ran).\n\n", r.RatioToKueueJobSets)
	}
	b.WriteString("| phase | all JobSets | JobSets/s | → JobSet p50 / p95 / p99 (ms) | all running | → running p99 (ms) | all finished | failed |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, p := range r.Phases {
		running := "—"
		if p.AllRunningSeconds > 0 {
			running = fmt.Sprintf("%.2f s | %.0f", p.AllRunningSeconds, p.RunningLatencyMillis.P99)
		} else {
			running += " | —"
		}
		finished := fmt.Sprintf("%.0f s (%d/%d)", p.AllFinishedSeconds, p.Finished, p.Jobs)
		if r.Suspended {
			finished = fmt.Sprintf("statuses written: %.0f s (%d/%d)", p.AllFinishedSeconds, p.Finished, p.Jobs)
		}
		name := p.Name
		if p.PerSecond > 0 {
			name += fmt.Sprintf(" (submitted at %g/s)", p.PerSecond)
		}
		fmt.Fprintf(&b, "| %s | %.2f s | %.0f | %.0f / %.0f / %.0f | %s | %s | %d |\n",
			name, p.AllJobSetsSeconds, p.JobSetsPerSecond, p.LatencyMillis.P50, p.LatencyMillis.P95, p.LatencyMillis.P99,
			running, finished, p.Failed)
	}
	if p := r.phase("pair"); p != nil {
		fmt.Fprintf(&b, "\nIn the pair phase, %d JobSet creates were retried because JobSet's webhook had not seen the owning TrainJob yet (50 ms apart).\n", p.OwnerRetries)
	}
	b.WriteString("\n| phase | manager writes/job to its JobSet | writes/job in all | conflicts (409) | reconciles (errors) | writes/min at rest (manager, leases apart) | lease writes/min | other clients' writes/min at rest | manager CPU s | manager peak RSS MiB | manager RSS at rest MiB (KiB per job) | manager watches ended / relists | watches closed by the API server |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range r.Phases {
		if clientOnly(p.Name) {
			continue
		}
		fmt.Fprintf(&b, "| %s | %.2f | %.2f | %d | %d (%d) | %.2f | %.1f | %.1f | %.1f | %.0f | %.0f (%.1f) | %d / %d | %d |\n",
			p.Name, p.ManagerWritesPerJobToJobSet, p.ManagerWritesPerJob, p.Conflicts, p.Reconciles, p.ReconcileErrors,
			p.RestManagerWritesPerMin, p.RestManagerLeaseWritesPerMin, p.RestOtherWritesPerMin, p.ManagerCPUSeconds, p.ManagerPeakRSSMiB,
			p.ManagerRestRSSMiB, p.ManagerKiBPerJob, p.ManagerWatches, p.ManagerLists, p.TerminatedWatchers)
	}
	for _, p := range r.Phases {
		if len(p.ManagerRequestsPerJob) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\nManager requests per job, phase %s (audit log):", p.Name)
		keys := make([]string, 0, len(p.ManagerRequestsPerJob))
		for k := range p.ManagerRequestsPerJob {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for i, k := range keys {
			sep := ","
			if i == 0 {
				sep = ""
			}
			fmt.Fprintf(&b, "%s `%s` %.2f", sep, k, p.ManagerRequestsPerJob[k])
		}
		b.WriteString(".\n")
	}
	b.WriteString("\nCPU seconds per component and phase:\n\n| phase |")
	comps := map[string]bool{}
	for _, p := range r.Phases {
		for k := range p.CPUSeconds {
			comps[k] = true
		}
	}
	names := make([]string, 0, len(comps))
	for k := range comps {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, " %s |", n)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(names)) + "\n")
	for _, p := range r.Phases {
		fmt.Fprintf(&b, "| %s |", p.Name)
		for _, n := range names {
			fmt.Fprintf(&b, " %.1f |", p.CPUSeconds[n])
		}
		b.WriteString("\n")
	}
	for _, p := range r.Phases {
		if len(p.Profiles) > 0 {
			fmt.Fprintf(&b, "\nCPU profiles of phase %s's burst (`go tool pprof -top -cum FILE`): `%s`.\n", p.Name, strings.Join(p.Profiles, "`, `"))
		}
	}
	if len(r.GoBenchmarks) > 0 {
		b.WriteString("\nThe manager's CPU work per TrainJob, in process (`go test -bench . -benchmem ./pkg/controller/...`):\n\n```\n")
		for _, l := range r.GoBenchmarks {
			b.WriteString(l + "\n")
		}
		b.WriteString("```\n")
	}
	return b.String()
}

func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%d × %s", runtime.NumCPU(), model)
}

func gitCommit(repo string) string {
	out, err := exec.Command("git", "-C", repo, "describe", "--always", "--dirty").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}
