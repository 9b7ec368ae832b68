// Command trainyard-local starts, stops and uses the local cluster of package
// pkg/localcluster: etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
// kwok nodes, process and container nodes, JobSet, Kueue and the Trainyard
// manager, all on 127.0.0.1 (docs/local-cluster.md). `make cluster-up`,
// `make cluster-down` and `make run` run it.
//
//	trainyard-local up     [--state-dir DIR] [--cpu-nodes N] [--gpu-nodes N] [--gpus-per-node N]
//	                       [--kueue-frameworks a,b,c] [--manager-arg ARG]... [--untainted-nodes]
//	                       [--process-nodes N] [--container-nodes N] [--gang-scheduler volcano|coscheduling]
//	                       [--no-manager] [--timeout D]
//	trainyard-local down   [--state-dir DIR]
//	trainyard-local status [--state-dir DIR]
//	trainyard-local run    [-quick | -containers] [-kueue] [-keep] [-timeout 15m] [-state-dir bin/cluster]
//	trainyard-local run    -tools [RUN FLAGS]   (what make run builds: the cluster's binaries)
//	trainyard-local --version
//
// up, down and status share the state directory, which defaults to bin/cluster
// in the repository; the kubeconfig is written to STATE_DIR/kubeconfig. run is
// `make run` (run.go): a cluster with a process node, then Kubeflow's PyTorch
// guide through the trainyard CLI.
//
// The flags are the standard library's, not cobra's (pflag) as in the
// trainyard CLI: it accepts both -quick and --quick, so `make run
// RUN_ARGS=-quick` and the docs' `--container-nodes=2` both keep working.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/clientcmd"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/trainyard/trainyard/pkg/localcluster"
	"github.com/trainyard/trainyard/pkg/version"
)

func main() {
	// The cluster's own components log to their files under the state
	// directory; this command's controller-runtime clients have nothing to
	// add, and without a logger controller-runtime prints a stack trace.
	ctrllog.SetLogger(logr.Discard())
	// Flags before the command: --version (and -h).
	top := flag.NewFlagSet("trainyard-local", flag.ContinueOnError)
	top.Usage = usage
	showVersion := version.RegisterFlag(top)
	if err := top.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		os.Exit(2)
	}
	if showVersion.Handled(os.Stdout) {
		return
	}
	args := top.Args()
	if len(args) == 0 {
		usage()
		os.Exit(2)
	}
	var err error
	switch args[0] {
	case "up":
		err = up(args[1:])
	case "down":
		err = down(args[1:])
	case "status":
		err = status(args[1:])
	case "run":
		os.Exit(runCommand(args[1:]))
	case "help":
		usage()
		return
	default:
		usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "trainyard-local:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, `usage: trainyard-local up|down|status|run [flags]   (trainyard-local CMD -h for flags)
       trainyard-local --version`)
}

type multi []string

func (m *multi) String() string     { return strings.Join(*m, " ") }
func (m *multi) Set(s string) error { *m = append(*m, s); return nil }

func stateDirFlag(fs *flag.FlagSet) *string {
	return fs.String("state-dir", "", "state directory (default: bin/cluster in the repository)")
}

func resolveStateDir(dir string) (string, error) {
	if dir != "" {
		return filepath.Abs(dir)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	repo, err := localcluster.FindRepoDir(wd)
	if err != nil {
		return "", fmt.Errorf("%w (or pass --state-dir)", err)
	}
	return filepath.Join(repo, "bin", "cluster"), nil
}

func up(args []string) error {
	fs := flag.NewFlagSet("up", flag.ExitOnError)
	dir := stateDirFlag(fs)
	cpu := fs.Int("cpu-nodes", 2, "kwok CPU nodes")
	gpu := fs.Int("gpu-nodes", 1, "kwok GPU nodes")
	gpus := fs.Int("gpus-per-node", 8, "nvidia.com/gpu per GPU node")
	procs := fs.Int("process-nodes", 0, "process nodes: pods run as processes on this machine (needs bin/trainyard-node)")
	containers := fs.Int("container-nodes", 0, "container nodes: real kubelets with their own containerd, pods in real containers (needs bin/k8s/kubelet, kube-proxy, coredns and provisioner: make container-node-tools; installs "+localcluster.ContainerNodePackagesScript+"'s packages when missing)")
	fw := fs.String("kueue-frameworks", strings.Join(localcluster.DefaultKueueFrameworks, ","), "Kueue integrations.frameworks, comma-separated")
	untainted := fs.Bool("untainted-nodes", false, "create the kwok nodes without kwok's NoSchedule taint, so that pods need no toleration")
	gang := fs.String("gang-scheduler", "", "also run a gang scheduler: "+strings.Join(slices.Sorted(maps.Keys(gangTools)), ", ")+" (its binaries in bin/k8s: make cluster-tools GANG_SCHEDULER=<name>)")
	noManager := fs.Bool("no-manager", false, "run no manager and install none of Trainyard (CRDs, webhooks, runtimes, roles), for installing it as deployed: the Helm chart or a kustomize overlay (docs/install.md)")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up starting after this long")
	var managerArgs multi
	fs.Var(&managerArgs, "manager-arg", "extra argument for trainyard-manager (repeatable)")
	_ = fs.Parse(args)
	stateDir, err := resolveStateDir(*dir)
	if err != nil {
		return err
	}
	if *cpu == 0 && *gpu == 0 && *procs == 0 && *containers == 0 {
		return errors.New("need at least one node")
	}
	if _, ok := gangTools[*gang]; *gang != "" && !ok {
		return fmt.Errorf("--gang-scheduler %q: want one of %s", *gang, strings.Join(slices.Sorted(maps.Keys(gangTools)), ", "))
	}
	if *containers > 0 {
		if err := localcluster.InstallContainerNodePackages(context.Background(), os.Stderr); err != nil {
			return err
		}
	}
	var frameworks []string
	for _, f := range strings.Split(*fw, ",") {
		if f = strings.TrimSpace(f); f != "" {
			frameworks = append(frameworks, f)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	start := time.Now()
	c, err := localcluster.Up(ctx, localcluster.Options{
		StateDir: stateDir, CPUNodes: *cpu, GPUNodes: *gpu, GPUsPerNode: *gpus, ProcessNodes: *procs,
		ContainerNodes: *containers, KueueFrameworks: append([]string{}, frameworks...), ManagerArgs: managerArgs,
		UntaintedNodes: *untainted, GangScheduler: *gang, Detach: true, Progress: os.Stderr, ExternalManager: *noManager,
	})
	if err != nil {
		return err
	}
	fmt.Printf("Local cluster up in %.1fs (state and logs in %s).\n", time.Since(start).Seconds(), stateDir)
	fmt.Printf("kubeconfig: %s\n", c.Kubeconfig())
	fmt.Printf("Try:        %s --kubeconfig %s get nodes\n", kubectlPath(), c.Kubeconfig())
	fmt.Printf("Stop with:  make cluster-down\n")
	return nil
}

// gangTools are the binaries of each gang scheduler (make cluster-tools
// GANG_SCHEDULER=<name> builds them into bin/k8s; Up says so when they are
// missing).
var gangTools = map[string][]string{
	localcluster.GangSchedulerVolcano:      {localcluster.VolcanoScheduler, localcluster.VolcanoControllers},
	localcluster.GangSchedulerCoscheduling: {localcluster.CoschedulingScheduler, localcluster.CoschedulingController},
}

// kubectlPath is bin/k8s/kubectl (make cluster-tools builds it), relative to the
// working directory when it is below it, else kubectl from PATH.
func kubectlPath() string {
	wd := mustGetwd()
	repo, err := localcluster.FindRepoDir(wd)
	if err != nil {
		return "kubectl"
	}
	b := filepath.Join(repo, "bin", "k8s", "kubectl")
	if _, err := os.Stat(b); err != nil {
		return "kubectl"
	}
	return rel(wd, b)
}

func mustGetwd() string {
	wd, _ := os.Getwd()
	return wd
}

func down(args []string) error {
	fs := flag.NewFlagSet("down", flag.ExitOnError)
	dir := stateDirFlag(fs)
	_ = fs.Parse(args)
	stateDir, err := resolveStateDir(*dir)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := localcluster.DownStateDir(stateDir); err != nil {
		return err
	}
	fmt.Printf("Local cluster in %s stopped in %.1fs (logs kept in %s).\n", stateDir, time.Since(start).Seconds(), filepath.Join(stateDir, "logs"))
	return nil
}

func status(args []string) error {
	fs := flag.NewFlagSet("status", flag.ExitOnError)
	dir := stateDirFlag(fs)
	_ = fs.Parse(args)
	stateDir, err := resolveStateDir(*dir)
	if err != nil {
		return err
	}
	ps, ports, err := localcluster.StatusOf(stateDir)
	if errors.Is(err, os.ErrNotExist) || (err == nil && len(ps) == 0) {
		fmt.Printf("No local cluster running in %s.\n", stateDir)
		return nil
	}
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "COMPONENT\tPID\tSTATE\tLOG")
	running := 0
	for _, p := range ps {
		st := "stopped"
		if p.Running {
			st = "running"
			running++
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", p.Name, p.PID, st, p.Log)
	}
	_ = tw.Flush()
	// With container nodes the API server is on the node address, not 127.0.0.1: the kubeconfig says where.
	server := fmt.Sprintf("https://127.0.0.1:%d", ports.APIServer)
	if kc, err := clientcmd.LoadFromFile(filepath.Join(stateDir, "kubeconfig")); err == nil {
		for _, cl := range kc.Clusters {
			server = cl.Server
		}
	}
	fmt.Printf("API server: %s   kubeconfig: %s\n", server, filepath.Join(stateDir, "kubeconfig"))
	if running != len(ps) {
		return fmt.Errorf("%d of %d components are not running", len(ps)-running, len(ps))
	}
	return nil
}
