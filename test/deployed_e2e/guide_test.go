package deployed_e2e

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/localcluster"
	"github.com/trainyard/trainyard/test/e2eutil"
)

// fashionRuntime is the runtime of examples/fashion-mnist/runtime.yaml.
const fashionRuntime = "torch-distributed-fashion-mnist"

// TestGuideInContainers: Kubeflow's PyTorch guide flow, as `make run` drives
// it on a process node (cmd/trainyard-local), through the trainyard CLI on the
// Fashion-MNIST runtime in real containers: the dataset initializer (the
// initializer image) delivers Fashion-MNIST, 2 nodes of the torch image train
// it to Complete, `trainyard logs` prefixes each node's lines, and the
// training code reports its progress to the manager's status server through
// its Service (status.trainerStatus).
func TestGuideInContainers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	rt, err := localcluster.FashionMNISTRuntimeForContainers(repo)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(ctx, rt); err != nil {
		t.Fatal(err)
	}
	cli := buildCLI(t)
	out, err := trainyardCLI(ctx, cli, "train", "--runtime", fashionRuntime, "--num-nodes", "2",
		"--resources", "cpu=1,memory=2Gi", "examples/fashion-mnist/train.py")
	job := strings.TrimSpace(out)
	if err != nil || job == "" {
		t.Fatalf("trainyard train: %v: %s", err, out)
	}
	t.Cleanup(func() { _, _ = trainyardCLI(context.Background(), cli, "delete", job) })
	if out, err := trainyardCLI(ctx, cli, "wait", job, "--timeout", "10m"); err != nil {
		got, _ := trainyardCLI(ctx, cli, "get", job)
		t.Fatalf("trainyard wait: %v: %s\n%s\n%s", err, out, got, describeManager(ctx))
	}
	var tj trainer.TrainJob
	if err := c.Client().Get(ctx, client.ObjectKey{Namespace: "default", Name: job}, &tj); err != nil {
		t.Fatal(err)
	}
	if !apimeta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete) {
		t.Fatalf("TrainJob %s not Complete: %+v", job, tj.Status.Conditions)
	}
	logs, err := trainyardCLI(ctx, cli, "logs", job)
	if err != nil {
		t.Fatalf("trainyard logs: %v: %s", err, logs)
	}
	for _, rank := range []string{"0", "1"} {
		if !regexp.MustCompile(`(?m)^\[node-` + rank + `\]: `).MatchString(logs) {
			t.Errorf("trainyard logs has no line of [node-%s]:\n%s", rank, logs)
		}
	}
	if !strings.Contains(logs, "FASHION_MNIST_RESULT world_size=2 ") {
		t.Errorf("trainyard logs: no FASHION_MNIST_RESULT of a world of 2:\n%s", logs)
	}
	ts := tj.Status.TrainerStatus
	if ts == nil || ts.ProgressPercentage == nil || *ts.ProgressPercentage != 100 {
		t.Errorf("status.trainerStatus %+v: the pods' progress reports did not reach the status server, want 100%%", ts)
	}
	if ts != nil && ts.ProgressPercentage != nil {
		t.Logf("TrainJob %s Complete; trainerStatus %d%%, metrics %v", job, *ts.ProgressPercentage, ts.Metrics)
	}
}

// buildCLI builds cmd/trainyard.
func buildCLI(t *testing.T) string { t.Helper(); return e2eutil.BuildTemp(t, repo, "trainyard") }

// trainyardCLI runs the CLI in namespace default from the repository, so
// that example paths work as in the docs.
func trainyardCLI(ctx context.Context, bin string, args ...string) (string, error) {
	return runTool(ctx, bin, append([]string{"--kubeconfig", c.Kubeconfig(), "-n", "default"}, args...)...)
}
