package optimizationjob

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/childsync"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
	"github.com/trainyard/trainyard/pkg/observe"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
)

func job(n, p int32, dir trainer.ObjectiveDirection) *trainer.OptimizationJob {
	return &trainer.OptimizationJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "tune", UID: "uid-1"},
		Spec: trainer.OptimizationJobSpec{
			Objectives:      []trainer.Objective{{Metric: "loss", Direction: dir}},
			SearchAlgorithm: &trainer.SearchAlgorithm{Random: &trainer.RandomAlgorithm{Seed: ptr.To[int64](1)}},
			Parameters: []trainer.Parameter{
				{Name: "lr", SearchSpace: &trainer.SearchSpace{LogUniform: trainer.LogUniformSpace{Min: "0.001", Max: "0.1"}}},
			},
			NumTrials: n, ParallelTrials: p,
			TrainJobTemplate: trainer.TrainJobTemplateSpec{Spec: trainer.TrainJobSpec{
				RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"},
				Trainer:    &trainer.Trainer{Env: []corev1.EnvVar{{Name: "KUBEFLOW_TRAINER_OPT_LR", Value: "template"}, {Name: "A", Value: "b"}}},
			}},
		},
	}
}

// trial is an observed trial: running, or finished with a loss.
func trial(name, state, loss string) *trainer.TrainJob {
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	switch state {
	case "Complete", "Failed":
		tj.Status.Conditions = []metav1.Condition{{Type: state, Status: metav1.ConditionTrue, Reason: "R", Message: "m"}}
	}
	if loss != "" {
		tj.Status.TrainerStatus = &trainer.TrainerStatus{Metrics: []trainer.Metric{{Name: "acc", Value: "1"}, {Name: "loss", Value: loss}}}
	}
	return tj
}

func observed(tjs ...*trainer.TrainJob) *observe.Observed {
	obs := &observe.Observed{Children: childsync.Children{}}
	for _, tj := range tjs {
		obs.Children[childsync.Key{GroupKind: trainJobKind, Name: tj.Name}] = tj
	}
	return obs
}

func planned(t *testing.T, j *trainer.OptimizationJob, obs *observe.Observed) []string {
	t.Helper()
	p, err := Adapter{}.Plan(j, obs, time.Now())
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	var out []string
	for _, o := range p.Objects() {
		out = append(out, o.GetName())
	}
	return out
}

// TestPlan: the next trials by index, at most parallelTrials unfinished,
// never an index made before (observed, or recorded in status).
func TestPlan(t *testing.T) {
	recorded := job(4, 2, "")
	recorded.Status = &trainer.OptimizationJobStatus{Trials: []trainer.TrialStatus{
		{Name: "tune-trial-0", State: trainer.TrialSucceeded}, {Name: "tune-trial-1", State: trainer.TrialRunning},
	}}
	cases := map[string]struct {
		job  *trainer.OptimizationJob
		obs  *observe.Observed
		want []string
	}{
		"first trials":            {job(4, 2, ""), observed(), []string{"tune-trial-0", "tune-trial-1"}},
		"two running: none":       {job(4, 2, ""), observed(trial("tune-trial-0", "", ""), trial("tune-trial-1", "", "")), nil},
		"one finished: the next":  {job(4, 2, ""), observed(trial("tune-trial-0", "Complete", "1"), trial("tune-trial-1", "", "")), []string{"tune-trial-2"}},
		"a failed trial counts":   {job(3, 2, ""), observed(trial("tune-trial-0", "Failed", ""), trial("tune-trial-1", "Failed", "")), []string{"tune-trial-2"}},
		"all made: none":          {job(2, 2, ""), observed(trial("tune-trial-0", "Complete", "1"), trial("tune-trial-1", "Failed", "")), nil},
		"deleted trials not made": {recorded, observed(), []string{"tune-trial-2", "tune-trial-3"}},
		"a gap below the highest": {job(4, 1, ""), observed(trial("tune-trial-1", "Complete", "1")), []string{"tune-trial-2"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, planned(t, tc.job, tc.obs)); diff != "" {
				t.Errorf("trials planned (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNewTrial: name, label, annotations, env (the trial's value replaces
// the template's), nothing of the template changed.
func TestNewTrial(t *testing.T) {
	j := job(2, 1, "")
	tj := newTrial(j, 1, []trainer.ParameterAssignment{{Name: "lr", Value: "0.01"}, {Name: "x_", Value: "y"}})
	want := map[string]string{
		trainer.TrialIndexAnnotation:                  "1",
		trainer.TrialParametersAnnotation:             `[{"name":"lr","value":"0.01"},{"name":"x_","value":"y"}]`,
		trainer.TrialParameterAnnotationPrefix + "lr": "0.01",
		// x_ makes no valid annotation key: the JSON carries it
	}
	if diff := cmp.Diff(want, tj.Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	wantEnv := []corev1.EnvVar{{Name: "KUBEFLOW_TRAINER_OPT_LR", Value: "0.01"}, {Name: "A", Value: "b"}, {Name: "KUBEFLOW_TRAINER_OPT_X_", Value: "y"}}
	if diff := cmp.Diff(wantEnv, tj.Spec.Trainer.Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	if tj.Name != "tune-trial-1" || tj.Labels[trainer.OptimizationJobNameLabel] != "tune" {
		t.Errorf("name %q, labels %v", tj.Name, tj.Labels)
	}
	if j.Spec.TrainJobTemplate.Spec.Trainer.Env[0].Value != "template" {
		t.Error("newTrial changed the template")
	}
}

// TestStatus: records, counts, the best trial by direction (the lower
// index on a tie), conditions and events.
func TestStatus(t *testing.T) {
	cases := map[string]struct {
		dir        trainer.ObjectiveDirection
		trials     []*trainer.TrainJob
		wantBest   string
		wantValue  string
		wantCond   string // the condition that is True last, "" for none of Complete/Failed
		wantCounts []int32
		wantEvents []string
	}{
		"running": {"", []*trainer.TrainJob{trial("tune-trial-0", "Complete", "0.5"), trial("tune-trial-1", "", "")},
			"tune-trial-0", "0.5", "", []int32{2, 1, 1, 0}, []string{"TrialSucceeded", "BestTrialChanged"}},
		"minimize": {"", []*trainer.TrainJob{trial("tune-trial-0", "Complete", "0.5"), trial("tune-trial-1", "Complete", "0.25")},
			"tune-trial-1", "0.25", trainer.OptimizationJobComplete, []int32{2, 0, 2, 0}, []string{"TrialSucceeded", "TrialSucceeded", "BestTrialChanged", "Completed"}},
		"maximize": {trainer.ObjectiveDirectionMaximize, []*trainer.TrainJob{trial("tune-trial-0", "Complete", "0.5"), trial("tune-trial-1", "Complete", "0.25")},
			"tune-trial-0", "0.5", trainer.OptimizationJobComplete, []int32{2, 0, 2, 0}, []string{"TrialSucceeded", "TrialSucceeded", "BestTrialChanged", "Completed"}},
		"tie: the lower index": {"", []*trainer.TrainJob{trial("tune-trial-0", "Complete", "1"), trial("tune-trial-1", "Complete", "1.0")},
			"tune-trial-0", "1", trainer.OptimizationJobComplete, []int32{2, 0, 2, 0}, []string{"TrialSucceeded", "TrialSucceeded", "BestTrialChanged", "Completed"}},
		"no metric, not a number": {"", []*trainer.TrainJob{trial("tune-trial-0", "Complete", ""), trial("tune-trial-1", "Complete", "NaN")},
			"", "", trainer.OptimizationJobComplete, []int32{2, 0, 2, 0}, []string{"TrialSucceeded", "TrialSucceeded", "Completed"}},
		"one failed": {"", []*trainer.TrainJob{trial("tune-trial-0", "Failed", ""), trial("tune-trial-1", "Complete", "3")},
			"tune-trial-1", "3", trainer.OptimizationJobComplete, []int32{2, 0, 1, 1}, []string{"TrialFailed", "TrialSucceeded", "BestTrialChanged", "Completed"}},
		"all failed": {"", []*trainer.TrainJob{trial("tune-trial-0", "Failed", ""), trial("tune-trial-1", "Failed", "")},
			"", "", trainer.OptimizationJobFailed, []int32{2, 0, 0, 2}, []string{"TrialFailed", "TrialFailed", "Failed"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			j := job(2, 2, tc.dir)
			out := Adapter{}.Status(j, observed(tc.trials...), jobframework.Sync{Planned: true}, time.Now())
			st := out.Job.(*trainer.OptimizationJob).Status
			if st.Result.TrainJobName != tc.wantBest || st.Result.ObjectiveValue != tc.wantValue {
				t.Errorf("result %+v, want %s=%s", st.Result, tc.wantBest, tc.wantValue)
			}
			if got := []int32{st.TrialsCreated, st.TrialsRunning, st.TrialsSucceeded, st.TrialsFailed}; !cmp.Equal(tc.wantCounts, got) {
				t.Errorf("created, running, succeeded, failed = %v, want %v", got, tc.wantCounts)
			}
			for _, c := range []string{trainer.OptimizationJobComplete, trainer.OptimizationJobFailed} {
				if apimeta.IsStatusConditionTrue(st.Conditions, c) != (c == tc.wantCond) {
					t.Errorf("condition %s: %v", c, st.Conditions)
				}
			}
			var reasons []string
			for _, e := range out.Events {
				reasons = append(reasons, e.Reason)
			}
			if diff := cmp.Diff(tc.wantEvents, reasons); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			// The same pass again, on the written status: no event repeats.
			again := Adapter{}.Status(out.Job, observed(tc.trials...), jobframework.Sync{Planned: true}, time.Now())
			for _, e := range again.Events {
				if e.Reason != EventCompleted && e.Reason != EventFailed {
					t.Errorf("event repeated on the next pass: %+v", e)
				}
			}
		})
	}
}

// TestInvalidSpecInStatus: with webhooks off, Plan's field errors make the
// job Failed (InvalidSpec) with them in the message; a finished job stays.
func TestInvalidSpecInStatus(t *testing.T) {
	j := job(2, 3, "")
	_, err := Adapter{}.Plan(j, observed(), time.Now())
	var invalid *framework.InvalidError
	if !errors.As(err, &invalid) {
		t.Fatalf("Plan of parallelTrials > numTrials: %v, want an InvalidError", err)
	}
	out := Adapter{}.Status(j, observed(), jobframework.Sync{Err: err}, time.Now())
	c := apimeta.FindStatusCondition(out.Job.(*trainer.OptimizationJob).Status.Conditions, trainer.OptimizationJobFailed)
	if c == nil || c.Reason != trainer.OptimizationJobInvalidSpecReason || !strings.Contains(c.Message, "spec.parallelTrials") {
		t.Errorf("Failed condition %+v", c)
	}
	if done, _ := (Adapter{}).Finished(out.Job); !done {
		t.Error("an invalid job is not finished")
	}
}

// TestValidate: field paths of what only Trainyard checks.
func TestValidate(t *testing.T) {
	cases := map[string]struct {
		mutate func(*trainer.OptimizationJob)
		want   []string
	}{
		"valid":                {func(*trainer.OptimizationJob) {}, nil},
		"trial names too long": {func(j *trainer.OptimizationJob) { j.Name = "a23456789012345678901234567890123456789012345678901234567" }, []string{"metadata.name"}},
		"name not DNS-1035":    {func(j *trainer.OptimizationJob) { j.Name = "9tune" }, []string{"metadata.name"}},
		"same env twice": {func(j *trainer.OptimizationJob) {
			j.Spec.Parameters = append(j.Spec.Parameters, trainer.Parameter{Name: "LR", SearchSpace: &trainer.SearchSpace{Categorical: trainer.CategoricalSpace{Choices: []string{"a"}}}})
		}, []string{"spec.parameters[1].name"}},
		"same name twice": {func(j *trainer.OptimizationJob) { j.Spec.Parameters = append(j.Spec.Parameters, j.Spec.Parameters[0]) }, []string{"spec.parameters[1].name"}},
		"bad name":        {func(j *trainer.OptimizationJob) { j.Spec.Parameters[0].Name = "learning-rate" }, []string{"spec.parameters[0].name"}},
		"template name":   {func(j *trainer.OptimizationJob) { j.Spec.TrainJobTemplate.Name = "x" }, []string{"spec.trainJobTemplate.metadata"}},
		"two objectives": {func(j *trainer.OptimizationJob) {
			j.Spec.Objectives = append(j.Spec.Objectives, trainer.Objective{Metric: "acc"})
		}, []string{"spec.objectives"}},
		"trial TrainJob invalid": {func(j *trainer.OptimizationJob) { j.Spec.TrainJobTemplate.Spec.Trainer.NumNodes = ptr.To[int32](-1) }, []string{"spec.trainJobTemplate.spec.trainer.numNodes"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			j := job(2, 1, "")
			tc.mutate(j)
			_, _, errs := Prepare(j)
			var got []string
			for _, e := range errs {
				got = append(got, e.Field)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("error paths (-want +got):\n%s\n%v", diff, errs)
			}
		})
	}
}

// TestSyncEvents: one TrialCreated per created trial, related to it.
func TestSyncEvents(t *testing.T) {
	j := job(2, 2, "")
	tj := newTrial(j, 0, []trainer.ParameterAssignment{{Name: "lr", Value: "0.01"}})
	key := childsync.Key{GroupKind: trainJobKind, Name: tj.Name}
	evs := Adapter{}.SyncEvents(j, jobframework.Sync{Result: childsync.Result{
		Actions: map[childsync.Key]childsync.Action{key: childsync.Created}, Children: childsync.Children{key: tj}}})
	if len(evs) != 1 || evs[0].Message != "Created trial tune-trial-0: lr=0.01" || evs[0].Related.GetName() != "tune-trial-0" {
		t.Errorf("events %+v", evs)
	}
}
