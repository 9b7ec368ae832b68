package processnode_e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/trainyard/trainyard/test/e2eutil"
)

// buildCLI builds cmd/trainyard into a temporary directory.
func buildCLI(t *testing.T) string { t.Helper(); return e2eutil.BuildTemp(t, repo, "trainyard") }

// cliCmd is trainyard with the cluster's kubeconfig and namespace ns, run from the
// repository (so that examples/... paths work as in the docs).
func cliCmd(bin, ns string, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	cmd := exec.Command(bin, append([]string{"--kubeconfig", c.Kubeconfig(), "-n", ns}, args...)...)
	cmd.Dir = repo
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	return cmd, &out, &errOut
}

func exitCode(err error) int {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// runTrainyard runs trainyard to its end and returns stdout and the exit code.
func runTrainyard(t *testing.T, bin, ns string, args ...string) (string, int) {
	t.Helper()
	cmd, out, errOut := cliCmd(bin, ns, args...)
	code := exitCode(cmd.Run())
	t.Logf("$ trainyard %s  (exit %d)\n%s%s", strings.Join(args, " "), code, out, errOut)
	return out.String(), code
}

// scriptDirs are the directories the script-carrying command creates on a process
// node: the pods run on this machine and see its /tmp.
func scriptDirs() map[string]bool {
	dirs, _ := filepath.Glob("/tmp/trainyard.??????")
	m := map[string]bool{}
	for _, d := range dirs {
		m[d] = true
	}
	return m
}

// removeNewScriptDirs removes, when the test ends, the script directories
// that appeared during it holding script.
func removeNewScriptDirs(t *testing.T, script string) {
	before := scriptDirs()
	t.Cleanup(func() {
		for d := range scriptDirs() {
			if _, err := os.Stat(filepath.Join(d, script)); !before[d] && err == nil {
				_ = os.RemoveAll(d)
			}
		}
	})
}

var cliResultRE = regexp.MustCompile(`^\[node-(\d)\]: .*MNIST_RESULT rank=(\d) world_size=2 steps=(\d+) .* ok=(True|False)`)

// TestCLITrainMNIST is the SDK flow from a shell, training for real: `trainyard
// train` ships examples/mnist/mnist.py in the TrainJob's command to 2 nodes of
// torch-distributed, `trainyard logs -f` streams both nodes while they train, and
// `trainyard wait` exits 0 once the TrainJob is Complete.
func TestCLITrainMNIST(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	bin := buildCLI(t)
	const ns = "cli-mnist"
	createNamespace(t, ctx, ns)
	removeNewScriptDirs(t, "mnist.py")

	// The environment examples/mnist/trainjob.yaml sets, and fewer steps than the
	// script's default, which its result line must show. What Debian's torch 1.13
	// needs on Python 3.11 the process node sets itself.
	out, code := runTrainyard(t, bin, ns, "train", "--runtime", "torch-distributed", "--num-nodes", "2",
		"--resources", "cpu=500m,memory=512Mi",
		"--env", "PET_MONITOR_INTERVAL=1",
		"--env", "OMP_NUM_THREADS=1", "--env", "PYTHONUNBUFFERED=1", "--env", "EXPECT_WORLD_SIZE=2", "--env", "MNIST_STEPS=200",
		"examples/mnist/mnist.py")
	job := strings.TrimSpace(out)
	if code != 0 || job == "" {
		t.Fatalf("train: exit %d, printed %q", code, out)
	}

	// Follow the logs from the start, as a user would in another terminal.
	logsCmd, logsOut, logsErr := cliCmd(bin, ns, "logs", "-f", job)
	if err := logsCmd.Start(); err != nil {
		t.Fatal(err)
	}
	logsDone := make(chan error, 1)
	go func() { logsDone <- logsCmd.Wait() }()
	defer func() { _ = logsCmd.Process.Kill() }()

	waitOut, code := runTrainyard(t, bin, ns, "wait", job, "--timeout", "6m")
	if code != 0 || !strings.Contains(waitOut, "TrainJob "+job+": Running, 2/2 nodes ready") || !strings.Contains(waitOut, "TrainJob "+job+": Complete") {
		t.Errorf("wait: exit %d, want 0 after Running with 2/2 nodes and Complete", code)
	}
	// Rank 0 of mnist.py reports through the status server; wait, not on a
	// terminal, prints a plain line per change.
	if !regexp.MustCompile(`progress \d+%, ETA \S+, loss=`).MatchString(waitOut) {
		t.Errorf("wait printed no progress line:\n%s", waitOut)
	}

	// logs -f returns by itself once the job is finished and the streams have ended.
	select {
	case err := <-logsDone:
		if exitCode(err) != 0 {
			t.Errorf("logs -f: exit %d: %s", exitCode(err), logsErr)
		}
	case <-time.After(time.Minute):
		t.Fatalf("logs -f still running a minute after the TrainJob finished:\n%s", logsOut)
	}
	t.Logf("$ trainyard logs -f %s\n%s%s", job, logsOut, logsErr)
	if !strings.Contains(logsErr.String(), "[progress] progress ") {
		t.Errorf("logs -f printed no progress on stderr:\n%s", logsErr)
	}
	ranks := map[string]bool{}
	lines := strings.Split(strings.TrimSpace(logsOut.String()), "\n")
	for _, l := range lines {
		if !strings.HasPrefix(l, "[node-0]: ") && !strings.HasPrefix(l, "[node-1]: ") {
			t.Errorf("logs -f line without a node prefix: %q", l)
		}
		if m := cliResultRE.FindStringSubmatch(l); m != nil {
			if m[1] != m[2] || m[3] != "200" || m[4] != "True" {
				t.Errorf("node %s: result of rank %s after %s steps, ok=%s (want its own rank, 200 steps, ok)", m[1], m[2], m[3], m[4])
			}
			ranks[m[1]] = true
		}
	}
	if !ranks["0"] || !ranks["1"] {
		t.Errorf("logs -f showed the MNIST_RESULT of nodes %v, want [node-0] and [node-1]", ranks)
	}

	// Afterwards: the logs of one node, and the steps.
	out, code = runTrainyard(t, bin, ns, "logs", job, "--node", "1")
	if code != 0 || !strings.Contains(out, "[node-1]: ") || strings.Contains(out, "[node-0]: ") || !strings.Contains(out, "MNIST_RESULT rank=1") {
		t.Errorf("logs --node 1: exit %d, want only node 1's log with its result", code)
	}
	out, code = runTrainyard(t, bin, ns, "get", job)
	for _, rank := range []string{"0", "1"} {
		want := fmt.Sprintf("Step: node-%s, Status: Succeeded, Devices: cpu x 1", rank)
		if code != 0 || !strings.Contains(out, want) || !strings.Contains(out, "Status:    Complete") {
			t.Errorf("get: exit %d, want Complete and %q", code, want)
		}
	}
	if _, code = runTrainyard(t, bin, ns, "delete", job); code != 0 {
		t.Errorf("delete: exit %d", code)
	}
}

// TestCLIGuideFunctionOnUpstreamRuntime: the shape of Kubeflow's PyTorch guide
// through `trainyard train` on runtimes/torch-distributed.yaml as upstream ships
// it (no PET_REDIRECTS/PET_TEE, no working directory): torchrun starts on the
// host's torch 1.13 because the process node sets what that needs, the process
// group forms across 2 nodes x 2 CPUs (world size 4), and local rank 0 of each
// node downloads into ./data in its container's own root, not the host's /.
// This machine has no network, so the download itself fails, and the TrainJob
// with it: the test checks that it failed there and nowhere earlier.
func TestCLIGuideFunctionOnUpstreamRuntime(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	bin := buildCLI(t)
	const ns = "cli-guide"
	createNamespace(t, ctx, ns)
	removeNewScriptDirs(t, "guide_fashion_mnist.py")
	if _, err := os.Stat("/data"); err == nil {
		t.Fatal("/data exists on the host before the test; the test could not tell whose it is")
	}

	out, code := runTrainyard(t, bin, ns, "train", "--runtime", "torch-distributed", "--num-nodes", "2",
		"--resources", "cpu=2,memory=1Gi", "test/processnode_e2e/testdata/guide_fashion_mnist.py")
	job := strings.TrimSpace(out)
	if code != 0 || job == "" {
		t.Fatalf("train: exit %d, printed %q", code, out)
	}
	// Followed from the start: a failed JobSet's pods do not stay.
	logsCmd, logsOut, logsErr := cliCmd(bin, ns, "logs", "-f", job)
	if err := logsCmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = logsCmd.Process.Kill() }()
	cond := waitFinished(t, ctx, ns, job)
	logsDone := make(chan error, 1)
	go func() { logsDone <- logsCmd.Wait() }()
	select {
	case err := <-logsDone:
		t.Logf("logs -f: exit %d", exitCode(err))
	case <-time.After(time.Minute):
		t.Errorf("logs -f still running a minute after the TrainJob finished")
	}
	t.Logf("$ trainyard logs -f %s\n%s%s", job, logsOut, logsErr)
	logs := map[string]string{}
	for _, l := range strings.SplitAfter(logsOut.String(), "\n") {
		for _, rank := range []string{"0", "1"} {
			if rest, ok := strings.CutPrefix(l, "[node-"+rank+"]: "); ok {
				logs[rank] += rest
			}
		}
	}
	for _, rank := range []string{"0", "1"} {
		l := logs[rank]
		if strings.Contains(l, "object has no attribute 'get'") {
			t.Errorf("node-%s: torchrun crashed at start (torch 1.13 on Python 3.11 without PET_REDIRECTS/PET_TEE)", rank)
		}
		// The runtime's pods restart on failure: every run's 2 ranks join.
		if n := strings.Count(l, "GUIDE world_size=4 "); n < 2 || n%2 != 0 {
			t.Errorf("node-%s: %d ranks joined a process group of 4, want its 2 per run", rank, n)
		}
		m := regexp.MustCompile(`GUIDE downloading into (\S+)`).FindStringSubmatch(l)
		if m == nil {
			t.Errorf("node-%s: local rank 0 did not reach the download", rank)
			continue
		}
		if m[1] == "/data" || !strings.HasSuffix(m[1], "/roots/node/data") {
			t.Errorf("node-%s: ./data is %s, want the container's own root (…/roots/node/data)", rank, m[1])
		}
		if strings.Contains(l, "GUIDE data ready") {
			t.Errorf("node-%s: the download succeeded; this test expects a machine without a network", rank)
		}
		if !regexp.MustCompile(`(?i)download|urlopen|URLError`).MatchString(l) {
			t.Errorf("node-%s: no download error in the log", rank)
		}
	}
	if cond.Type != "Failed" {
		t.Errorf("TrainJob %s: %s (%s), want Failed at the download", job, cond.Type, cond.Message)
	}
	if _, err := os.Stat("/data"); err == nil {
		t.Error("/data was created on the host")
	}
}
