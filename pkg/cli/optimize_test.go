package cli

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

func TestParseParam(t *testing.T) {
	space := func(s trainer.SearchSpace) *trainer.SearchSpace { return &s }
	cases := map[string]struct {
		want    trainer.Parameter
		wantErr string
	}{
		"lr=loguniform:0.0001:0.1": {want: trainer.Parameter{Name: "lr", SearchSpace: space(trainer.SearchSpace{LogUniform: trainer.LogUniformSpace{Min: "0.0001", Max: "0.1", Type: trainer.ParameterTypeFloat}})}},
		"units=logint:8:512":       {want: trainer.Parameter{Name: "units", SearchSpace: space(trainer.SearchSpace{LogUniform: trainer.LogUniformSpace{Min: "8", Max: "512", Type: trainer.ParameterTypeInt}})}},
		"x=uniform:-1:1":           {want: trainer.Parameter{Name: "x", SearchSpace: space(trainer.SearchSpace{Uniform: trainer.UniformSpace{Min: "-1", Max: "1", Type: trainer.ParameterTypeFloat}})}},
		"layers=int:1:8":           {want: trainer.Parameter{Name: "layers", SearchSpace: space(trainer.SearchSpace{Uniform: trainer.UniformSpace{Min: "1", Max: "8", Type: trainer.ParameterTypeInt}})}},
		"bs=categorical:32,64":     {want: trainer.Parameter{Name: "bs", SearchSpace: space(trainer.SearchSpace{Categorical: trainer.CategoricalSpace{Choices: []string{"32", "64"}}})}},
		"lr":                       {wantErr: "want NAME="},
		"lr=normal:0:1":            {wantErr: `unknown space "normal"`},
		"lr=uniform:1":             {wantErr: "uniform wants MIN:MAX"},
	}
	for arg, tc := range cases {
		t.Run(arg, func(t *testing.T) {
			got, err := ParseParam(arg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseParam (-want +got):\n%s", diff)
			}
		})
	}
}

// optimize --dry-run from flags: the OptimizationJob whose template is the
// TrainJob train makes of the same flags.
func TestOptimizeDryRun(t *testing.T) {
	f := newFakeCluster(t, clusterRuntime("torch-distributed", "torch", trainer.TrainingRuntimeSpec{}))
	code, out, errOut := f.run("optimize", "--dry-run", "--name", "tune", "--metric", "acc", "--maximize", "--trials", "4", "--parallel", "2", "--seed", "3",
		"--param", "lr=loguniform:0.0001:0.1", "--param", "bs=categorical:32,64", "--num-nodes", "2", "--queue", "team-a", "--", "python3", "train.py")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var job trainer.OptimizationJob
	if err := yaml.UnmarshalStrict([]byte(out), &job); err != nil {
		t.Fatalf("output is no OptimizationJob: %v\n%s", err, out)
	}
	want := trainer.OptimizationJobSpec{
		Objectives:      []trainer.Objective{{Metric: "acc", Direction: trainer.ObjectiveDirectionMaximize}},
		SearchAlgorithm: &trainer.SearchAlgorithm{Random: &trainer.RandomAlgorithm{Seed: ptr.To[int64](3)}},
		Parameters: []trainer.Parameter{
			{Name: "lr", SearchSpace: &trainer.SearchSpace{LogUniform: trainer.LogUniformSpace{Min: "0.0001", Max: "0.1", Type: trainer.ParameterTypeFloat}}},
			{Name: "bs", SearchSpace: &trainer.SearchSpace{Categorical: trainer.CategoricalSpace{Choices: []string{"32", "64"}}}},
		},
		NumTrials: 4, ParallelTrials: 2,
		TrainJobTemplate: trainer.TrainJobTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{QueueLabel: "team-a"}},
			Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"},
				Trainer: &trainer.Trainer{NumNodes: ptr.To[int32](2), Command: []string{"python3", "train.py"}}},
		},
	}
	if diff := cmp.Diff(want, job.Spec); diff != "" || job.Name != "tune" || job.Kind != trainer.OptimizationJobKind {
		t.Errorf("%s %s, spec (-want +got):\n%s", job.Kind, job.Name, diff)
	}
	if code, _, errOut := f.run("optimize", "train.py"); code != ExitUsage || !strings.Contains(errOut, "no --param") {
		t.Errorf("optimize without --param: exit %d, %s", code, errOut)
	}
}

// optimize -f creates the file's OptimizationJob in the namespace of -n;
// get optimizationjob/NAME shows its trials' table.
func TestOptimizeFileAndGet(t *testing.T) {
	f := newFakeCluster(t)
	file := t.TempDir() + "/opt.yaml"
	writeFile(t, file, `apiVersion: trainer.kubeflow.org/v1alpha1
kind: OptimizationJob
metadata:
  name: tune
spec:
  objectives: [{metric: loss, direction: Minimize}]
  parameters:
  - name: lr
    searchSpace: {logUniform: {min: "0.001", max: "0.1"}}
  numTrials: 2
  trainJobTemplate:
    spec:
      runtimeRef: {name: torch-distributed}
`)
	code, out, errOut := f.run("optimize", "-f", file, "-n", "team", "--no-watch")
	if code != 0 || strings.TrimSpace(out) != "tune" {
		t.Fatalf("exit %d, out %q: %s", code, out, errOut)
	}
	var job trainer.OptimizationJob
	if err := f.c.Get(t.Context(), client.ObjectKey{Namespace: "team", Name: "tune"}, &job); err != nil {
		t.Fatal(err)
	}
	job.Status = &trainer.OptimizationJobStatus{
		Conditions: []metav1.Condition{{Type: "Complete", Status: metav1.ConditionTrue, Reason: "TrialsFinished", Message: "2 trials finished"}},
		Result:     trainer.Result{TrainJobName: "tune-trial-1", ObjectiveValue: "0.25", Parameters: []trainer.ParameterAssignment{{Name: "lr", Value: "0.01"}}},
		Trials: []trainer.TrialStatus{{Name: "tune-trial-0", State: trainer.TrialFailed, Message: "FailedJobs"},
			{Name: "tune-trial-1", State: trainer.TrialSucceeded, ObjectiveValue: "0.25"}},
	}
	if err := f.c.Update(t.Context(), &job); err != nil {
		t.Fatal(err)
	}
	trial := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "tune-trial-1",
		Labels:      map[string]string{trainer.OptimizationJobNameLabel: "tune"},
		Annotations: map[string]string{trainer.TrialParametersAnnotation: `[{"name":"lr","value":"0.01"}]`},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: trainer.GroupVersion.String(), Kind: trainer.OptimizationJobKind, Name: "tune",
			UID: job.UID, Controller: ptr.To(true)}}}}
	if err := f.c.Create(t.Context(), trial); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = f.run("get", "optimizationjob/tune", "-n", "team")
	if code != 0 {
		t.Fatalf("get: exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"Status:     Complete (TrialsFinished: 2 trials finished)",
		"Best:       tune-trial-1, loss=0.25 (lr=0.01)",
		"TRIAL         STATE      LOSS  LR",
		"tune-trial-0  Failed     -     -",
		"tune-trial-1  Succeeded  0.25  0.01",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("get output lacks %q:\n%s", want, out)
		}
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
