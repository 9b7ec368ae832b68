// Command bench (make bench) measures Trainyard under a burst of TrainJobs on
// the local cluster (pkg/localcluster: a module-built kube-apiserver, etcd,
// kube-controller-manager, kube-scheduler, kwok nodes, JobSet, Kueue and the
// manager), against the limit measured in the same run: a plain client creating
// the same JobSets directly. It writes the raw numbers as JSON and a Markdown
// report, and can regenerate the generated part of docs/performance.md.
//
// Phases, in this order, each in its own namespace:
//
//	raw       N JobSets (the manager's own rendering of the benchmark TrainJob,
//	          without owner) created directly by W parallel unthrottled clients;
//	pair      the pair limit: N TrainJobs (managed by another controller, so
//	          the manager leaves them alone), each followed by its JobSet,
//	          created by the same clients through the same webhooks;
//	trainyard N TrainJobs created the same way; the manager makes the JobSets;
//	kueue     N TrainJobs through a Kueue LocalQueue with room for all of them.
//
// Each phase ends when every job has finished (kwok runs each pod for a few
// seconds), and is followed by a rest window in which writes are counted.
// Requests per job are counted from the API server's audit log by user agent.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/trainyard/trainyard/pkg/localcluster"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/kueue"
	"github.com/trainyard/trainyard/test/perf/harness"
)

type config struct {
	n, nodesPerJob      int
	load                harness.Load
	phases              []string
	stateDir, out, docs string
	rest, timeout       time.Duration
	managerArgs         []string
	kueueConcurrency    int
	label               string
	manager             string
	goBench             string
	suspend             bool
	// bare runs the cluster without webhooks or other controllers
	// (localcluster.Options.Bare): nothing runs the JobSets.
	bare    bool
	profile time.Duration
}

func main() {
	var cfg config
	var phases, managerArgs string
	flag.IntVar(&cfg.n, "n", 1000, "TrainJobs (and JobSets) per phase")
	flag.IntVar(&cfg.nodesPerJob, "nodes", 2, "numNodes of each TrainJob")
	flag.IntVar(&cfg.load.Workers, "workers", 16, "parallel clients submitting the burst")
	flag.Float64Var(&cfg.load.PerSecond, "rate", 0, "jobs per second the clients submit in all (0: as fast as the API server answers): a paced load below saturation measures the latency of the path, not of the queue behind an unpaced burst")
	flag.StringVar(&phases, "phases", "raw,pair,trainyard,paced,kueue-jobset,kueue", "phases to run, in order (default with -suspend: "+suspendedPhases+"): raw, pair, trainyard, paced (TrainJobs submitted at -rate, default 0.6 × the pair phase's rate), kueue-jobset (plain JobSets through Kueue: the Kueue path's anchor), kueue (TrainJobs through Kueue, in the manager's --kueue-mode)")
	flag.StringVar(&cfg.stateDir, "state-dir", "bin/perf/cluster", "state directory of the local cluster")
	flag.StringVar(&cfg.out, "out", "bin/perf", "directory for result.json and result.md")
	flag.StringVar(&cfg.docs, "docs", "", "regenerate the generated section of this Markdown file (docs/performance.md)")
	flag.DurationVar(&cfg.rest, "rest", time.Minute, "rest window after each phase in which writes are counted")
	flag.DurationVar(&cfg.timeout, "timeout", 60*time.Minute, "give up after this long")
	flag.StringVar(&managerArgs, "manager-args", "", "extra manager flags, space separated")
	flag.IntVar(&cfg.kueueConcurrency, "kueue-concurrency", 0, "workers of Kueue's TrainJob and JobSet integrations (0: Kueue's default, one each)")
	flag.StringVar(&cfg.manager, "manager", "", "manager binary (default bin/trainyard-manager), to compare two builds in one session; name it trainyard-manager (e.g. /tmp/before/trainyard-manager): the audit counts find the manager by its user agent, which is the binary's name")
	flag.StringVar(&cfg.label, "label", "", "name of this run in the report (default: the git commit)")
	flag.BoolVar(&cfg.suspend, "suspend", false, "submit the TrainJobs suspended: JobSets are created, no pods run (for scale points beyond what kwok runs on this machine); the jobs are not waited for")
	flag.BoolVar(&cfg.bare, "bare", false, "a bare API server: no webhooks (the manager's are off), no kube-controller-manager, scheduler, kwok, JobSet or Kueue; the pair and trainyard phases (default) measure JobSet creation and the first status write alone, to compare the manager with the pair client without anyone else's work in the way")
	flag.DurationVar(&cfg.profile, "profile", 0, "CPU-profile the API server and the manager for this long from the start of each phase's burst, into -out (profile-PHASE-{apiserver,manager}.pprof, and the top functions in .pprof.txt); 0: off")
	flag.StringVar(&cfg.goBench, "go-bench", "", "output of go test -bench to include in the report")
	flag.Parse()
	if (cfg.suspend || cfg.bare) && !flagSet("phases") {
		// Suspended jobs are the scale points (10k, 50k): the pair limit and
		// Trainyard's rate, not the phases that need the jobs to run.
		phases = suspendedPhases
	}
	cfg.phases = strings.Split(phases, ",")
	cfg.managerArgs = strings.Fields(managerArgs)
	if cfg.bare {
		cfg.managerArgs = append(cfg.managerArgs, "--enable-webhooks=false")
	}
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// suspendedPhases are the phases of a -suspend or -bare run unless -phases says.
const suspendedPhases = "pair,trainyard"

// flagSet tells whether the command line set the flag name.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func run(cfg config) error {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, cfg.timeout)
	defer cancelT()
	for _, p := range cfg.phases {
		if p != "raw" && p != "pair" && p != "trainyard" && p != "paced" && p != "kueue-jobset" && p != "kueue" {
			return fmt.Errorf("unknown phase %q", p)
		}
	}

	// Room for every pod of a phase at once: 500 pods per kwok node.
	pods := cfg.n * cfg.nodesPerJob
	nodes := max(2, (pods*3/2+499)/500)
	if cfg.bare {
		nodes = 0
	}
	wd, _ := os.Getwd()
	repo, err := localcluster.FindRepoDir(wd)
	if err != nil {
		return err
	}
	logf("starting the local cluster: %d kwok nodes × 500 pods, audit log on", nodes)
	kueueMode := kueue.ModeTrainJob
	if slices.Contains(cfg.managerArgs, "--kueue-mode="+string(kueue.ModeJobSet)) {
		kueueMode = kueue.ModeJobSet
	}
	c, err := localcluster.Up(ctx, localcluster.Options{
		KueueFrameworks:  localcluster.KueueFrameworksFor(kueueMode),
		KueueConcurrency: cfg.kueueConcurrency,
		StateDir:         cfg.stateDir,
		CPUNodes:         nodes,
		PodsPerNode:      500,
		UntaintedNodes:   true,
		AuditLog:         true,
		Profiling:        cfg.profile > 0,
		DisableQPSLimits: true,
		Bare:             cfg.bare,
		Runtimes:         []string{filepath.Join(repo, "runtimes", "torch-distributed.yaml")},
		ManagerArgs:      cfg.managerArgs,
		ManagerBinary:    cfg.manager,
		Progress:         os.Stderr,
	})
	if err != nil {
		return err
	}
	defer func() {
		logf("stopping the cluster (logs in %s)", c.Logs())
		_ = c.Down()
	}()

	b, err := newBench(ctx, c, cfg)
	if err != nil {
		return err
	}
	if cfg.profile > 0 {
		if b.prof, err = newProfiler(cfg.profile, cfg.out, c.RESTConfig(), c.ManagerPprofURL(0)); err != nil {
			return err
		}
	}
	res := Result{
		Label: cfg.label, Date: time.Now().UTC().Format(time.RFC3339), N: cfg.n, NodesPerJob: cfg.nodesPerJob,
		Workers: cfg.load.Workers, PerSecond: cfg.load.PerSecond, KwokNodes: nodes, Suspended: cfg.suspend, Bare: cfg.bare, ManagerArgs: cfg.managerArgs, KueueConcurrency: cfg.kueueConcurrency, Machine: machine(),
	}
	if res.Label == "" {
		res.Label = gitCommit(repo)
	}
	tmpl, err := b.warmUp(ctx)
	if err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	for _, p := range cfg.phases {
		var ph *Phase
		switch p {
		case "raw":
			ph, err = b.raw(ctx, tmpl)
		case "pair":
			ph, err = b.pair(ctx, tmpl)
		case "trainyard":
			ph, err = b.trainJobs(ctx, "trainyard", "", b.cfg.load)
		case "paced":
			load := pacedLoad(cfg, res.Phases)
			logf("phase paced: %s", pace(load.PerSecond))
			ph, err = b.trainJobs(ctx, "paced", "", load)
			if ph != nil {
				ph.PerSecond = load.PerSecond
			}
		case "kueue-jobset":
			ph, err = b.kueueJobSets(ctx, tmpl)
		case "kueue":
			ph, err = b.kueue(ctx)
		}
		if err != nil {
			return fmt.Errorf("phase %s: %w", p, err)
		}
		res.Phases = append(res.Phases, *ph)
		logf("phase %s: all %d JobSets after %.2fs (%.0f/s), p99 %.0f ms", p, ph.Jobs, ph.AllJobSetsSeconds, ph.JobSetsPerSecond, ph.LatencyMillis.P99)
	}
	res.derive()
	if cfg.goBench != "" {
		b, err := os.ReadFile(cfg.goBench)
		if err != nil {
			return err
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "Benchmark") {
				res.GoBenchmarks = append(res.GoBenchmarks, strings.Join(strings.Fields(l), " "))
			}
		}
	}
	if st, err := harness.ReadProc(b.managerPID); err == nil {
		res.ManagerPeakRSSMiB = mib(st.PeakRSS)
	}
	return write(cfg, res)
}

// pacedShare is the paced phase's rate as a share of the pair limit measured
// earlier in the run: below saturation, so that its latency is the path's
// (webhooks, watch, reconcile, JobSet create) rather than the wait behind an
// unpaced burst that outruns every consumer.
const pacedShare = 0.6

// pacedLoad is the paced phase's load: -rate when set, else pacedShare of the
// pair phase (or, without one, of the trainyard phase) run before it.
func pacedLoad(cfg config, done []Phase) harness.Load {
	load := harness.Load{Workers: cfg.load.Workers, PerSecond: cfg.load.PerSecond}
	if load.PerSecond > 0 {
		return load
	}
	load.PerSecond = 20                                  // no earlier phase to scale from
	for _, name := range []string{"trainyard", "pair"} { // the pair limit wins
		for _, ph := range done {
			if ph.Name == name && ph.JobSetsPerSecond > 0 {
				load.PerSecond = math.Round(pacedShare * ph.JobSetsPerSecond)
			}
		}
	}
	return load
}

func write(cfg config, res Result) error {
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(cfg.out, "result.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	samples := map[string]*Samples{}
	for _, p := range res.Phases {
		samples[p.Name] = p.Samples
	}
	sj, err := json.Marshal(samples)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(cfg.out, "samples.json"), append(sj, '\n'), 0o644); err != nil {
		return err
	}
	md := res.Markdown()
	if err := os.WriteFile(filepath.Join(cfg.out, "result.md"), []byte(md), 0o644); err != nil {
		return err
	}
	fmt.Print(md)
	if cfg.docs != "" {
		if err := updateDocs(cfg.docs, md, js); err != nil {
			return err
		}
		logf("updated %s", cfg.docs)
	}
	return nil
}

// updateDocs replaces what lies between the generated-section markers.
func updateDocs(path, md string, js []byte) error {
	const begin, end = "<!-- bench:begin -->", "<!-- bench:end -->"
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(old)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		return errors.New(path + ": no " + begin + " … " + end + " section")
	}
	body := begin + "\n" + md + "\n<details><summary>raw numbers (JSON)</summary>\n\n```json\n" + string(js) + "```\n</details>\n" + end
	return os.WriteFile(path, []byte(s[:i]+body+s[j+len(end):]), 0o644)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s bench: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
