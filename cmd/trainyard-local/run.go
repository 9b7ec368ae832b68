package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/cli"
	"github.com/trainyard/trainyard/pkg/cli/logs"
	"github.com/trainyard/trainyard/pkg/localcluster"
)

const (
	namespace       = "default"
	jobName         = "mnist"
	exampleDir      = "examples/mnist"
	jobSetNameLabel = logs.JobSetNameLabel
)

// runCommand is `trainyard-local run`, which is `make run`: Trainyard's whole
// flow, for real, on this machine with no cluster and no container runtime. It
// starts the local cluster of pkg/localcluster (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, the JobSet and Trainyard
// controllers; no Kueue, which the guide does not use, and no kwok, as there
// are no kwok nodes) with one process node, whose agent
// (cmd/trainyard-node) runs pods as processes of this machine, each in its own
// network, mount and PID namespaces.
//
// By default it then follows Kubeflow's PyTorch guide through the trainyard CLI,
// as the SDK does (fashion.go): list the runtimes, train examples/fashion-mnist
// on torch-distributed-fashion-mnist with 2 nodes of cpu=2,memory=1Gi (WORLD_SIZE
// 4), whose dataset initializer delivers Fashion-MNIST from Debian's package;
// wait for node-0, show the steps, follow the logs ([node-<rank>]: prefixes),
// wait, print the loss curve, delete. With -quick it applies examples/mnist (a
// ConfigMap with a synthetic training script and a 2-node TrainJob on
// torch-distributed) instead and streams its logs. With -containers the same
// guide runs in real containers on 2 container nodes instead of the process
// node: the initializer and torch images of make images, imported into each
// node. With -kueue the cluster also runs Kueue, and the guide's TrainJob is
// submitted to a LocalQueue (kueue.go), which admits it as one gang. It exits
// 0 once the TrainJob is Complete, non-zero with the TrainJob's reason otherwise.
//
// Usage: trainyard-local run [-quick | -containers | -tune] [-kueue] [-keep] [-timeout 15m] [-state-dir bin/cluster]
// (or: make run, make run RUN_ARGS=-quick). It needs root; the process node's pods run the
// host's torchrun and torchvision (Debian's, with dataset-fashion-mnist) and trainyard-initializer:
// `make run` installs them.
//
// trainyard-local run -tools [FLAGS] prints the test/tools/build.sh targets run with those flags
// needs, one per line (localcluster.Binaries of its cluster): make run builds those, nothing else.
func runCommand(args []string) int {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	containers := fs.Bool("containers", false, "train Fashion-MNIST in real containers on 2 container nodes (the images of make images) instead of on a process node")
	quick := fs.Bool("quick", false, "train the synthetic examples/mnist (about 20 s) instead of Fashion-MNIST through the CLI")
	keep := fs.Bool("keep", false, "keep the cluster running afterwards (stop it with `make cluster-down`)")
	timeout := fs.Duration("timeout", 15*time.Minute, "give up after this long")
	stateDir := fs.String("state-dir", "", "state directory of the cluster (default: bin/cluster in the repository)")
	kueue := fs.Bool("kueue", false, "also run Kueue (built on first use) and submit the guide's TrainJob to a LocalQueue with the process node's quota: Kueue admits it as one gang")
	tune := fs.Bool("tune", false, "search the guide's learning rate and batch size instead: an OptimizationJob of 4 trials, 2 at a time, on the process node (examples/fashion-mnist-tuning)")
	tools := fs.Bool("tools", false, "print the test/tools/build.sh targets run with these flags needs, one per line, and exit (make run builds those)")
	_ = fs.Parse(args)
	rf := runFlags{quick: *quick, containers: *containers, keep: *keep, kueue: *kueue, tune: *tune}
	if *tools {
		return printTools(rf)
	}
	return run(rf, *timeout, *stateDir)
}

// runFlags are run's choices of what to train where.
type runFlags struct {
	quick, containers, keep, kueue, tune bool
}

// runOptions is the cluster run starts (Up fills in the rest).
func runOptions(repo, stateDir string, f runFlags) localcluster.Options {
	o := localcluster.Options{
		StateDir: stateDir, RepoDir: repo, ProcessNodes: 1, Detach: f.keep,
		NoKueue:  !f.kueue,  // the guide queues nothing unless asked
		Progress: os.Stdout, // and the runtimes a real install has (localcluster.LocalRuntimes)
	}
	if f.containers {
		o.ProcessNodes, o.ContainerNodes = 0, 2
	}
	return o
}

func run(f runFlags, timeout time.Duration, stateDir string) int {
	quick, containers, keep := f.quick, f.containers, f.keep
	start := time.Now()
	wd, _ := os.Getwd()
	repo, err := localcluster.FindRepoDir(wd)
	if err != nil {
		return fail(err)
	}
	if stateDir == "" {
		stateDir = filepath.Join(repo, "bin", "cluster")
	}
	if os.Geteuid() != 0 {
		return fail(errors.New("make run needs root: the process node gives every pod its own network, mount and PID namespaces"))
	}
	if quick && containers {
		return fail(errors.New("-quick runs on the process node only"))
	}
	if quick && f.kueue {
		return fail(errors.New("-kueue queues the guide's TrainJob, not -quick's"))
	}
	if f.tune && (quick || containers || f.kueue) {
		return fail(errors.New("-tune runs on the process node, without Kueue"))
	}
	if out, err := exec.Command("/usr/bin/python3", "-c", "import torch").CombinedOutput(); err != nil && !containers {
		return fail(fmt.Errorf("/usr/bin/python3 cannot import torch (%s); install Debian's python3-torch (make run does)", strings.TrimSpace(string(out))))
	}
	if !quick && !containers {
		if _, err := os.Stat("/usr/local/bin/trainyard-initializer"); err != nil {
			return fail(errNoInitializer)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	o := runOptions(repo, stateDir, f)
	nodes := "a process node"
	if containers {
		nodes = "2 container nodes"
	}
	fmt.Printf("==> Starting a local cluster with %s (state and logs in %s)\n", nodes, rel(wd, stateDir))
	c, err := localcluster.Up(ctx, o)
	if err != nil {
		if strings.Contains(err.Error(), "still running") {
			err = fmt.Errorf("%w\n(stop it with `make cluster-down`)", err)
		}
		return fail(err)
	}
	code := func() int {
		defer func() {
			if keep {
				return
			}
			fmt.Println("==> Stopping the cluster")
			if err := c.Down(); err != nil {
				fmt.Fprintln(os.Stderr, "stopping the cluster:", err)
			}
		}()
		if quick {
			return trainMNIST(ctx, c, repo, start)
		}
		if f.tune {
			return tuneFashionMNIST(ctx, c, repo, start)
		}
		if containers {
			if err := setUpContainers(ctx, c, repo); err != nil {
				return fail(err)
			}
		}
		queue := ""
		if f.kueue {
			about, err := setUpQueue(ctx, c)
			if err != nil {
				return fail(err)
			}
			fmt.Printf("==> Kueue: %s\n", about)
			queue = runQueue
		}
		return trainFashionMNIST(ctx, c, repo, start, containers, queue)
	}()
	if keep {
		kubectl := rel(wd, filepath.Join(repo, "bin", "k8s", "kubectl"))
		fmt.Printf(`
==> The cluster keeps running. kubeconfig: %s
    export KUBECONFIG=%s
    %s get nodes,trainjobs,jobsets,pods -o wide
    %s logs -l %s=%s --prefix
Stop it with: make cluster-down
`, c.Kubeconfig(), c.Kubeconfig(), kubectl, kubectl, jobSetNameLabel, jobName)
	}
	return code
}

// trainMNIST applies the example, follows it and reports.
func trainMNIST(ctx context.Context, c *localcluster.Cluster, repo string, start time.Time) int {
	cs, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		return fail(err)
	}
	fmt.Printf("==> kubectl apply -k %s (ConfigMap mnist-script from mnist.py, TrainJob %s)\n", exampleDir, jobName)
	out, err := localcluster.Kustomize(filepath.Join(repo, exampleDir)) // what kubectl -k renders
	if err != nil {
		return fail(err)
	}
	objs, err := decodeYAML(out)
	if err != nil {
		return fail(err)
	}
	for _, o := range objs {
		o.SetNamespace(namespace) // as kubectl does for the current namespace
	}
	if err := c.Apply(ctx, objs...); err != nil {
		return fail(err)
	}
	applied := time.Now()

	results := &resultCollector{}
	streamer := &logs.Streamer{Client: cs, Namespace: namespace, Job: jobName, Node: -1, Out: func(l string) {
		fmt.Println(l)
		results.line(l)
	}}
	jobFinished := make(chan struct{})
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		streamer.Follow(ctx, jobFinished, 10*time.Second)
	}()

	// Wait for the TrainJob to finish.
	var job trainer.TrainJob
	var finished *metav1.Condition
	lastPhase, lastBar := "", ""
	for finished == nil {
		if err := c.Client().Get(ctx, client.ObjectKey{Namespace: namespace, Name: jobName}, &job); err != nil && ctx.Err() == nil {
			fmt.Fprintln(os.Stderr, "reading the TrainJob:", err)
		}
		if p := string(job.Status.Phase); p != lastPhase && p != "" {
			fmt.Printf("==> TrainJob %s: %s (%.1fs after apply)\n", jobName, p, time.Since(applied).Seconds())
			lastPhase = p
		}
		// What rank 0 reports through the status server (status.trainerStatus).
		if bar := cli.ProgressBar(job.Status.TrainerStatus); bar != lastBar {
			fmt.Printf("==> TrainJob %s progress %s\n", jobName, bar)
			lastBar = bar
		}
		for _, t := range []string{"Complete", "Failed"} {
			if cond := apimeta.FindStatusCondition(job.Status.Conditions, t); cond != nil && cond.Status == metav1.ConditionTrue {
				finished = cond
			}
		}
		if finished != nil {
			break
		}
		select {
		case <-ctx.Done():
			return fail(fmt.Errorf("TrainJob %s not finished: %v (phase %q)", jobName, ctx.Err(), job.Status.Phase))
		case <-time.After(500 * time.Millisecond):
		}
	}
	// Let the log streams drain: they end with the containers.
	close(jobFinished)
	<-followed

	fmt.Println()
	summary := results.summary()
	for _, s := range summary {
		fmt.Println("   ", s)
	}
	elapsed := time.Since(applied).Seconds()
	if finished.Type != "Complete" {
		fmt.Printf("==> TrainJob %s failed: %s: %s (after %.1fs; make run took %.1fs)\n", jobName, finished.Reason, finished.Message, elapsed, time.Since(start).Seconds())
		fmt.Printf("    component logs: %s\n", c.Logs())
		return 1
	}
	fmt.Printf("==> TrainJob %s Complete (%s) in %.1fs after apply; make run took %.1fs\n", jobName, finished.Reason, elapsed, time.Since(start).Seconds())
	return 0
}

// resultCollector keeps the log lines the summary needs.
type resultCollector struct {
	mu      sync.Mutex
	results []string
}

var resultRE = regexp.MustCompile(`MNIST_RESULT rank=(\d+) world_size=(\d+) .*first_loss=([0-9.]+) last_loss=([0-9.]+) first_loss_mean=([0-9.]+) last_loss_mean=([0-9.]+)`)

func (l *resultCollector) line(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if resultRE.MatchString(s) {
		l.results = append(l.results, s)
	}
}

// summary turns the MNIST_RESULT lines into one line per rank and the global loss.
func (l *resultCollector) summary() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	var global string
	for _, r := range l.results {
		m := resultRE.FindStringSubmatch(r)
		first, _ := strconv.ParseFloat(m[3], 64)
		last, _ := strconv.ParseFloat(m[4], 64)
		out = append(out, fmt.Sprintf("rank %s: WORLD_SIZE=%s, loss %.4f -> %.4f (mean of the first and last 20 steps)", m[1], m[2], first, last))
		global = fmt.Sprintf("all ranks: loss %s -> %s", m[5], m[6])
	}
	sort.Strings(out)
	if global != "" {
		out = append(out, global)
	}
	if len(out) == 0 {
		out = append(out, "(no MNIST_RESULT line in the logs)")
	}
	return out
}

func decodeYAML(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, err
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

func rel(wd, p string) string {
	if r, err := filepath.Rel(wd, p); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return p
}

func fail(err error) int {
	fmt.Fprintln(os.Stderr, "error:", err)
	return 1
}

// setUpContainers imports the initializer and torch images into every
// container node and replaces the Fashion-MNIST runtime with its container
// form (localcluster.FashionMNISTRuntimeForContainers).
func setUpContainers(ctx context.Context, c *localcluster.Cluster, repo string) error {
	fmt.Println("==> Importing the initializer and torch images into the container nodes")
	if err := c.ImportImages(ctx, localcluster.ImageArchive(repo, "trainyard-initializer"), localcluster.ImageArchive(repo, "torch")); err != nil {
		return err
	}
	rt, err := localcluster.FashionMNISTRuntimeForContainers(repo)
	if err != nil {
		return err
	}
	return c.Apply(ctx, rt)
}
