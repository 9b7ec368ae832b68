package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/cli"
	"github.com/trainyard/trainyard/pkg/localcluster"
)

// The default of make run: Kubeflow's PyTorch guide flow, through the trainyard
// CLI as the SDK drives it, on real Fashion-MNIST that the runtime's dataset
// initializer delivers from Debian's dataset-fashion-mnist.
const (
	fashionRuntime = "torch-distributed-fashion-mnist"
	fashionScript  = "examples/fashion-mnist/train.py"
	// containerInitializerVolume is the hostPath of the runtime's container
	// form (localcluster.FashionMNISTRuntimeForContainers): one directory per
	// TrainJob.
	containerInitializerVolume = "/var/tmp/trainyard-initializer"
)

// fashionCLI runs bin/trainyard against the cluster.
type fashionCLI struct {
	bin, kubeconfig, repo string
}

func (f *fashionCLI) cmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, f.bin, args...)
	cmd.Dir = f.repo
	cmd.Env = append(os.Environ(), "KUBECONFIG="+f.kubeconfig)
	return cmd
}

// show runs a command with its output on ours, after printing it.
func (f *fashionCLI) show(ctx context.Context, args ...string) error {
	fmt.Printf("==> trainyard %s\n", strings.Join(args, " "))
	cmd := f.cmd(ctx, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	return cmd.Run()
}

// shownJob is what this flow reads of `trainyard get NAME -o json`.
type shownJob struct {
	Status, Reason, Message string
	Steps                   []cli.Step
	TrainerStatus           *trainer.TrainerStatus
}

func (f *fashionCLI) get(ctx context.Context, name string) (*shownJob, error) {
	out, err := f.cmd(ctx, "get", name, "-o", "json").Output()
	if err != nil {
		return nil, fmt.Errorf("trainyard get %s: %w", name, err)
	}
	var j shownJob
	if err := json.Unmarshal(out, &j); err != nil {
		return nil, fmt.Errorf("trainyard get %s -o json: %w", name, err)
	}
	return &j, nil
}

// trainFashionMNIST: list the runtimes, train with 2 nodes of cpu=2,memory=1Gi
// (WORLD_SIZE 4, as in the guide), or one node per GPU where the process node
// has GPUs (choosePlacement), wait for node-0 to run, show the steps,
// follow the logs, wait, report the loss curve, delete. On container nodes
// (-containers) the nodes are 2 of 1 CPU: each container node offers this
// machine's CPUs.
func trainFashionMNIST(ctx context.Context, c *localcluster.Cluster, repo string, start time.Time, containers bool, queue string) int {
	f := &fashionCLI{bin: filepath.Join(repo, "bin", "trainyard"), kubeconfig: c.Kubeconfig(), repo: repo}
	if err := f.show(ctx, "runtimes"); err != nil {
		return fail(err)
	}
	where := placement{nodes: 2, resources: "cpu=1,memory=2Gi",
		about: "2 container nodes, which share this machine's CPUs: 2 nodes of 1 CPU, gloo, in the torch image"}
	if !containers {
		var err error
		if where, err = choosePlacement(ctx, c.Client()); err != nil {
			return fail(err)
		}
	}
	fmt.Printf("==> %s\n", where.about)
	args := []string{"train", "--runtime", fashionRuntime, "--num-nodes", strconv.Itoa(where.nodes), "--resources", where.resources}
	if queue != "" {
		args = append(args, "--queue", queue) // Kueue admits it as one gang (-kueue)
	}
	args = append(args, fashionScript)
	fmt.Printf("==> trainyard %s\n", strings.Join(args, " "))
	cmd := f.cmd(ctx, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return fail(fmt.Errorf("trainyard train: %w", err))
	}
	name := strings.TrimSpace(string(out))
	fmt.Println(name)
	created := time.Now()
	defer func() {
		// The TrainJob goes, and with it the JobSet and pods; the host directory
		// of its shared volume is the runtime's, removed here.
		_ = f.show(context.Background(), "delete", name)
		volume := c.ProcessHostPathRoot() // where the local cluster points the process nodes' runtime
		if containers {
			volume = containerInitializerVolume
		}
		_ = os.RemoveAll(filepath.Join(volume, "default_"+name))
	}()

	if err := f.show(ctx, "wait", name, "--for", "Running,Complete,Failed", "--timeout", "5m"); err != nil {
		return fail(err)
	}
	for {
		j, err := f.get(ctx, name)
		if err != nil {
			return fail(err)
		}
		if stepStatus(j, "node-0") == "Running" || j.Status == "Complete" || j.Status == "Failed" {
			break
		}
		select {
		case <-ctx.Done():
			return fail(fmt.Errorf("node-0 of %s not running: %w", name, ctx.Err()))
		case <-time.After(time.Second):
		}
	}
	running := time.Since(created)
	_ = f.show(ctx, "get", name)

	curve := &lossCurve{}
	fmt.Printf("==> trainyard logs -f %s\n", name)
	logs := f.cmd(ctx, "logs", "-f", name)
	pipe, err := logs.StdoutPipe()
	if err != nil {
		return fail(err)
	}
	logs.Stderr = os.Stderr
	if err := logs.Start(); err != nil {
		return fail(err)
	}
	sc := bufio.NewScanner(pipe)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		fmt.Println(sc.Text())
		curve.line(sc.Text())
	}
	_, _ = io.Copy(io.Discard, pipe)
	_ = logs.Wait()

	waitErr := f.show(ctx, "wait", name, "--timeout", "5m")
	_ = f.show(ctx, "get", name)
	j, err := f.get(ctx, name)
	if err != nil {
		return fail(err)
	}
	fmt.Println()
	for _, s := range curve.summary() {
		fmt.Println("   ", s)
	}
	fmt.Printf("    dataset-initializer: %s; node-0 Running %.1fs after train\n", stepStatus(j, "dataset-initializer"), running.Seconds())
	elapsed := time.Since(created).Seconds()
	if waitErr != nil || j.Status != "Complete" {
		fmt.Printf("==> TrainJob %s %s: %s: %s (after %.1fs; make run took %.1fs)\n", name, j.Status, j.Reason, j.Message, elapsed, time.Since(start).Seconds())
		fmt.Printf("    component logs: %s\n", c.Logs())
		return 1
	}
	if !curve.finished() {
		fmt.Printf("==> TrainJob %s Complete, but rank 0 never printed \"Training is finished\"\n", name)
		return 1
	}
	// Rank 0 reports progress to the manager's status server; a failed report
	// only prints a line, so check that one arrived.
	if j.TrainerStatus == nil {
		fmt.Printf("==> TrainJob %s Complete, but no progress reached status.trainerStatus (rank 0's logs say why)\n", name)
		return 1
	}
	fmt.Printf("==> TrainJob %s Complete (%s) in %.1fs after train; make run took %.1fs\n", name, j.Reason, elapsed, time.Since(start).Seconds())
	return 0
}

func stepStatus(j *shownJob, step string) string {
	for _, s := range j.Steps {
		if s.Name == step {
			return s.Status
		}
	}
	return ""
}

// lossCurve keeps rank 0's "Train Epoch: E [...]\tLoss: L" lines.
type lossCurve struct {
	mu       sync.Mutex
	losses   []float64
	epochs   []int
	done     bool
	resultLn string
}

var (
	epochRE  = regexp.MustCompile(`Train Epoch: (\d+) .*\tLoss: ([0-9.]+)`)
	fmResult = regexp.MustCompile(`FASHION_MNIST_RESULT .*`)
)

func (l *lossCurve) line(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if m := epochRE.FindStringSubmatch(s); m != nil {
		e, _ := strconv.Atoi(m[1])
		v, _ := strconv.ParseFloat(m[2], 64)
		l.epochs, l.losses = append(l.epochs, e), append(l.losses, v)
	}
	if strings.Contains(s, "Training is finished") {
		l.done = true
	}
	if m := fmResult.FindString(s); m != "" {
		l.resultLn = m
	}
}

func (l *lossCurve) finished() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done
}

// summary: the loss at the start, at the end of each epoch, and at the end.
func (l *lossCurve) summary() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.losses) == 0 {
		return []string{"(no \"Train Epoch\" line in the logs)"}
	}
	var parts []string
	for i, e := range l.epochs {
		if i+1 == len(l.epochs) || l.epochs[i+1] != e {
			parts = append(parts, fmt.Sprintf("end of epoch %d %.3f", e, l.losses[i]))
		}
	}
	out := []string{fmt.Sprintf("loss curve (rank 0, every 10 batches, %d points): first %.3f, %s; final loss %.3f",
		len(l.losses), l.losses[0], strings.Join(parts, ", "), l.losses[len(l.losses)-1])}
	if l.resultLn != "" {
		out = append(out, l.resultLn)
	}
	return out
}

// errNoInitializer: the runtime's dataset initializer runs the host's trainyard-initializer.
var errNoInitializer = errors.New("trainyard-initializer is not installed in /usr/local/bin (make run installs it: the process node runs the host's programs)")
