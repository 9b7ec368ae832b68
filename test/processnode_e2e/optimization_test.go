package processnode_e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// tuningExample is the search of `make run RUN_ARGS=-tune` as a user applies it.
var tuningExample = filepath.Join("examples", "fashion-mnist-tuning", "optimizationjob.yaml")

// tuningFlags are examples/fashion-mnist-tuning/README.md's `trainyard optimize`
// flags (cmd/trainyard-local/tune.go's), of which the example's YAML is the dry run.
var tuningFlags = []string{
	"--name", "tune-fashion-mnist", "--runtime", "torch-distributed-fashion-mnist",
	"--num-nodes", "1", "--resources", "cpu=1,memory=2Gi",
	"--metric", "loss", "--trials", "4", "--parallel", "2", "--seed", "1",
	"--param", "lr=loguniform:0.001:0.3", "--param", "batch_size=categorical:32,64,128",
	"--env", "FASHION_MNIST_EPOCHS=1", "--env", "FASHION_MNIST_MAX_STEPS=150",
	"examples/fashion-mnist/train.py",
}

// readOptimizationJob decodes an OptimizationJob YAML strictly.
func readOptimizationJob(t *testing.T, what string, data []byte) *trainer.OptimizationJob {
	t.Helper()
	job := &trainer.OptimizationJob{}
	if err := yaml.UnmarshalStrict(data, job); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return job
}

// TestTuningFashionMNIST is examples/fashion-mnist-tuning for real: its
// optimizationjob.yaml (checked first to be `trainyard optimize --dry-run` of
// the README's flags, so that it carries today's train.py) created as a user's
// kubectl apply does, on the shipped runtime torch-distributed-fashion-mnist:
// 4 trials, 2 at a time, each training on Debian's Fashion-MNIST and reporting
// its loss. The OptimizationJob completes with 4 succeeded trials, never more
// than 2 running, every trial's TrainJob Complete, and status.result names the
// succeeded trial with the smallest loss, with its value and parameters.
func TestTuningFashionMNIST(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	createFashionRuntime(t, ctx, "torch-distributed-fashion-mnist")
	bin := buildCLI(t)
	const ns = "tuning"
	createNamespace(t, ctx, ns)
	removeNewScriptDirs(t, "train.py") // each trial's packed script, in this machine's /tmp

	file, err := os.ReadFile(filepath.Join(repo, tuningExample))
	if err != nil {
		t.Fatal(err)
	}
	job := readOptimizationJob(t, tuningExample, file)
	cmd, out, errOut := cliCmd(bin, ns, append([]string{"optimize", "--dry-run"}, tuningFlags...)...)
	if err := cmd.Run(); err != nil {
		t.Fatalf("optimize --dry-run: %v\n%s", err, errOut)
	}
	dry := readOptimizationJob(t, "optimize --dry-run", out.Bytes())
	dry.Namespace = ""
	if !reflect.DeepEqual(dry, job) {
		t.Fatalf("%s is not `trainyard optimize --dry-run` of the README's flags (without the namespace): make it again\n--- dry run:\n%s", tuningExample, out)
	}

	job.Namespace = ns
	for i := range job.Spec.NumTrials {
		dir := filepath.Join(c.ProcessHostPathRoot(), fmt.Sprintf("%s_%s-trial-%d", ns, job.Name, i))
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
	}
	start := time.Now()
	if err := c.Client().Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Client().Delete(context.Background(), job) })

	// Until it finishes: never more than parallelTrials running at once.
	var got trainer.OptimizationJob
	var mostRunning int32
	var done *metav1.Condition
	for done == nil {
		if err := c.Client().Get(ctx, client.ObjectKeyFromObject(job), &got); err != nil && ctx.Err() == nil {
			t.Logf("reading OptimizationJob %s: %v", job.Name, err)
		}
		if s := got.Status; s != nil {
			mostRunning = max(mostRunning, s.TrialsRunning)
			for _, typ := range []string{trainer.OptimizationJobComplete, trainer.OptimizationJobFailed} {
				if cond := meta.FindStatusCondition(s.Conditions, typ); cond != nil && cond.Status == metav1.ConditionTrue {
					done = cond
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("OptimizationJob %s not finished: %v; status %+v", job.Name, ctx.Err(), got.Status)
		case <-time.After(500 * time.Millisecond):
		}
	}
	s := got.Status
	t.Logf("OptimizationJob %s %s in %.1fs: %s", job.Name, done.Type, time.Since(start).Seconds(), done.Message)
	if done.Type != trainer.OptimizationJobComplete || s.TrialsSucceeded != 4 || s.TrialsFailed != 0 || len(s.Trials) != 4 {
		t.Fatalf("want Complete with 4 succeeded trials; status %+v", s)
	}
	if mostRunning > job.Spec.ParallelTrials {
		t.Errorf("%d trials ran at once, parallelTrials is %d", mostRunning, job.Spec.ParallelTrials)
	}

	// The best is the succeeded trial with the smallest loss.
	best, bestLoss := "", 0.0
	for _, tr := range s.Trials {
		var tj trainer.TrainJob
		if err := c.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: tr.Name}, &tj); err != nil {
			t.Fatal(err)
		}
		cond := waitFinished(t, ctx, ns, tr.Name)
		t.Logf("trial %s: %s, loss %s, parameters %s", tr.Name, tr.State, tr.ObjectiveValue, tj.Annotations[trainer.TrialParametersAnnotation])
		loss, err := strconv.ParseFloat(tr.ObjectiveValue, 64)
		if tr.State != trainer.TrialSucceeded || cond.Type != trainer.TrainJobComplete || err != nil {
			t.Errorf("trial %s: %s, TrainJob %s, loss %q (%v): want Succeeded, Complete and a loss", tr.Name, tr.State, cond.Type, tr.ObjectiveValue, err)
			continue
		}
		if best == "" || loss < bestLoss {
			best, bestLoss = tr.Name, loss
		}
		if tr.Name != s.Result.TrainJobName {
			continue
		}
		var params []trainer.ParameterAssignment
		if err := json.Unmarshal([]byte(tj.Annotations[trainer.TrialParametersAnnotation]), &params); err != nil {
			t.Errorf("trial %s's parameters: %v", tr.Name, err)
		}
		if !reflect.DeepEqual(s.Result.Parameters, params) || s.Result.ObjectiveValue != tr.ObjectiveValue {
			t.Errorf("result %+v, want trial %s's loss %s and parameters %+v", s.Result, tr.Name, tr.ObjectiveValue, params)
		}
	}
	if s.Result.TrainJobName != best {
		t.Errorf("result names %s (loss %s), want %s, the smallest loss (%g)", s.Result.TrainJobName, s.Result.ObjectiveValue, best, bestLoss)
	}
	t.Logf("best trial %s: loss %s, parameters %+v", s.Result.TrainJobName, s.Result.ObjectiveValue, s.Result.Parameters)
}
