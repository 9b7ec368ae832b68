package jobset_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/childsync"
	"github.com/trainyard/trainyard/pkg/observe"
	"github.com/trainyard/trainyard/pkg/plan"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/jobset"
	rtt "github.com/trainyard/trainyard/pkg/runtime/testing"
)

var typeMeta = metav1.TypeMeta{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet"}

// trainerRJob is the replicated job the Build plugin emits for a trainer job
// built by rtt.MakeReplicatedJob with one container.
func trainerRJob(name string, nodes int32, c corev1.Container) jobsetv1alpha2.ReplicatedJob {
	return jobsetv1alpha2.ReplicatedJob{
		Name:     name,
		Replicas: 1,
		Template: batchv1.JobTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{trainer.AncestorLabel: trainer.AncestorTrainer}},
			Spec: batchv1.JobSpec{
				Parallelism:    ptr.To(nodes),
				Completions:    ptr.To(nodes),
				CompletionMode: ptr.To(batchv1.IndexedCompletion),
				Template:       corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{c}}},
			},
		},
	}
}

func TestBuild(t *testing.T) {
	node := rtt.MakeContainer("node", "trainer:latest")
	cases := map[string]struct {
		rt   *runtime.Runtime
		job  *trainer.TrainJob
		want *jobsetv1alpha2.JobSet
	}{
		"name, namespace, runtime metadata, node count, suspend false by default": {
			rt: rtt.MakeRuntime(trainer.ClusterTrainingRuntimeKind, "plain").
				Labels(map[string]string{"team": "ml"}).
				Annotations(map[string]string{"note": "from runtime"}).
				NumNodes(2).Obj(),
			job: rtt.MakeTrainJob("research", "llama").Obj(),
			want: &jobsetv1alpha2.JobSet{
				TypeMeta: typeMeta,
				ObjectMeta: metav1.ObjectMeta{
					Name: "llama", Namespace: "research",
					Labels:      map[string]string{"team": "ml"},
					Annotations: map[string]string{"note": "from runtime"},
				},
				Spec: jobsetv1alpha2.JobSetSpec{
					ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{trainerRJob("node", 2, node)},
					Suspend:        ptr.To(false),
				},
			},
		},
		"the TrainJob's numNodes and suspend": {
			rt:  rtt.MakeRuntime(trainer.ClusterTrainingRuntimeKind, "plain").NumNodes(2).Obj(),
			job: rtt.MakeTrainJob("ns", "job").NumNodes(8).Suspend(true).Obj(),
			want: &jobsetv1alpha2.JobSet{
				TypeMeta:   typeMeta,
				ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns"},
				Spec: jobsetv1alpha2.JobSetSpec{
					ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{trainerRJob("node", 8, node)},
					Suspend:        ptr.To(true),
				},
			},
		},
		"explicit suspend false": {
			rt:  rtt.MakeRuntime(trainer.ClusterTrainingRuntimeKind, "plain").Obj(),
			job: rtt.MakeTrainJob("ns", "job").Suspend(false).Obj(),
			want: &jobsetv1alpha2.JobSet{
				TypeMeta:   typeMeta,
				ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns"},
				Spec: jobsetv1alpha2.JobSetSpec{
					ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{trainerRJob("node", 1, node)},
					Suspend:        ptr.To(false),
				},
			},
		},
		"replicas forced to one on ancestor jobs, other jobs and the rest of the spec untouched": {
			rt: func() *runtime.Runtime {
				init := rtt.MakeReplicatedJob("init", trainer.AncestorDatasetInitializer, rtt.MakeContainer("dataset-initializer", "init:1"))
				init.Replicas = 3
				tr := rtt.MakeReplicatedJob("node", trainer.AncestorTrainer, node)
				tr.Replicas = 4
				tr.Template.Spec.Parallelism = ptr.To[int32](7)
				tr.Template.Spec.BackoffLimit = ptr.To[int32](0)
				aux := rtt.MakeReplicatedJob("aux", "", rtt.MakeContainer("aux", "aux:1"))
				aux.Replicas = 2
				aux.Template.Spec.Parallelism = ptr.To[int32](5)
				w := rtt.MakeRuntime(trainer.ClusterTrainingRuntimeKind, "plain").ReplicatedJobs(init, tr, aux).Subdomain("sub")
				w.Spec.Template.Spec.FailurePolicy = &jobsetv1alpha2.FailurePolicy{MaxRestarts: 3}
				w.Spec.Template.Spec.Suspend = ptr.To(true) // the TrainJob decides
				return w.Obj()
			}(),
			job: rtt.MakeTrainJob("ns", "job").NumNodes(2).Obj(),
			want: func() *jobsetv1alpha2.JobSet {
				init := rtt.MakeReplicatedJob("init", trainer.AncestorDatasetInitializer, rtt.MakeContainer("dataset-initializer", "init:1"))
				init.Replicas = 1
				tr := trainerRJob("node", 2, node)
				tr.Template.Spec.BackoffLimit = ptr.To[int32](0)
				aux := rtt.MakeReplicatedJob("aux", "", rtt.MakeContainer("aux", "aux:1"))
				aux.Replicas = 2
				aux.Template.Spec.Parallelism = ptr.To[int32](5)
				return &jobsetv1alpha2.JobSet{
					TypeMeta:   typeMeta,
					ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns"},
					Spec: jobsetv1alpha2.JobSetSpec{
						ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{init, tr, aux},
						Network:        &jobsetv1alpha2.Network{Subdomain: "sub"},
						FailurePolicy:  &jobsetv1alpha2.FailurePolicy{MaxRestarts: 3},
						Suspend:        ptr.To(false),
					},
				}
			}(),
		},
		"an explicit Indexed completion mode is kept": {
			rt: rtt.MakeRuntime(trainer.ClusterTrainingRuntimeKind, "plain").
				ReplicatedJobs(func() jobsetv1alpha2.ReplicatedJob {
					rj := rtt.MakeReplicatedJob("node", trainer.AncestorTrainer, node)
					rj.Template.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
					return rj
				}()).Obj(),
			job: rtt.MakeTrainJob("ns", "job").Obj(),
			want: &jobsetv1alpha2.JobSet{
				TypeMeta:   typeMeta,
				ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns"},
				Spec: jobsetv1alpha2.JobSetSpec{
					ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{trainerRJob("node", 1, node)},
					Suspend:        ptr.To(false),
				},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			info, err := runtime.NewInfo(tc.job, tc.rt)
			if err != nil {
				t.Fatalf("NewInfo: %v", err)
			}
			before := *info.Spec.DeepCopy()
			children, err := jobset.New().Build(info, tc.job)
			objs := (&plan.Plan{Children: children}).Objects()
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			if len(objs) != 1 {
				t.Fatalf("Build returned %d objects, want 1", len(objs))
			}
			got, ok := objs[0].(*jobsetv1alpha2.JobSet)
			if !ok {
				t.Fatalf("Build returned %T, want *JobSet", objs[0])
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("JobSet (-want +got):\n%s", diff)
			}
			// Build works on a copy: the Info stays as it was, and the JobSet
			// shares no maps with it.
			if diff := cmp.Diff(before, info.Spec); diff != "" {
				t.Errorf("Build changed the Info's spec (-before +after):\n%s", diff)
			}
			if got.Labels != nil {
				got.Labels["added"] = "x"
				if _, ok := info.Labels["added"]; ok {
					t.Errorf("JobSet labels alias the Info's labels")
				}
			}
		})
	}
}

func TestValidate(t *testing.T) {
	cases := map[string]struct {
		rt   *runtime.Runtime
		job  *trainer.TrainJob
		want []rtt.FieldErr
	}{
		"valid": {
			rt:  rtt.MakeRuntime(trainer.ClusterTrainingRuntimeKind, "plain").Obj(),
			job: rtt.MakeTrainJob("ns", "job").NumNodes(1).Obj(),
		},
		"runtime without replicated jobs": {
			rt:   rtt.MakeRuntime(trainer.ClusterTrainingRuntimeKind, "empty").ReplicatedJobs().Obj(),
			job:  rtt.MakeTrainJob("ns", "job").Obj(),
			want: []rtt.FieldErr{{Type: field.ErrorTypeInvalid, Field: "spec.runtimeRef"}},
		},
		"trainer set on a runtime without a trainer job": {
			rt: rtt.MakeRuntime(trainer.ClusterTrainingRuntimeKind, "plain").ReplicatedJobs(
				rtt.MakeReplicatedJob("main", "", rtt.MakeContainer("main", "x"))).Obj(),
			job:  rtt.MakeTrainJob("ns", "job").NumNodes(2).Obj(),
			want: []rtt.FieldErr{{Type: field.ErrorTypeInvalid, Field: "spec.trainer"}},
		},
		"no trainer on a runtime without a trainer job is fine": {
			rt: rtt.MakeRuntime(trainer.ClusterTrainingRuntimeKind, "plain").ReplicatedJobs(
				rtt.MakeReplicatedJob("main", "", rtt.MakeContainer("main", "x"))).Obj(),
			job: rtt.MakeTrainJob("ns", "job").Obj(),
		},
		"zero nodes are fine (Kubeflow Trainer v2.4)": {
			rt:  rtt.MakeRuntime(trainer.ClusterTrainingRuntimeKind, "plain").Obj(),
			job: rtt.MakeTrainJob("ns", "job").NumNodes(0).Obj(),
		},
		"negative nodes": {
			rt:   rtt.MakeRuntime(trainer.ClusterTrainingRuntimeKind, "plain").Obj(),
			job:  rtt.MakeTrainJob("ns", "job").NumNodes(-1).Obj(),
			want: []rtt.FieldErr{{Type: field.ErrorTypeInvalid, Field: "spec.trainer.numNodes"}},
		},
		"a replicated job name longer than 20 characters (a runtime stored with its webhook off)": {
			rt: func() *runtime.Runtime {
				rt := rtt.MakeRuntime(trainer.ClusterTrainingRuntimeKind, "plain").Obj()
				rt.Spec.Template.Spec.ReplicatedJobs[0].Name = "a-replicated-job-of-21"
				return rt
			}(),
			job:  rtt.MakeTrainJob("ns", "job").Obj(),
			want: []rtt.FieldErr{{Type: field.ErrorTypeInvalid, Field: "spec.runtimeRef"}},
		},
		"a name too long for the host names JobSet generates": {
			rt:   rtt.MakeRuntime(trainer.ClusterTrainingRuntimeKind, "plain").Obj(),
			job:  rtt.MakeTrainJob("ns", strings.Repeat("n", 60)).NumNodes(1).Obj(),
			want: []rtt.FieldErr{{Type: field.ErrorTypeInvalid, Field: "metadata.name"}},
		},
		"the same name with host names the pod templates set": {
			rt:  withHostnames(rtt.MakeRuntime(trainer.ClusterTrainingRuntimeKind, "plain").Obj()),
			job: rtt.MakeTrainJob("ns", strings.Repeat("n", 60)).NumNodes(1).Obj(),
		},
		"negative nodes from the runtime": {
			rt:   rtt.MakeRuntime(trainer.ClusterTrainingRuntimeKind, "plain").NumNodes(-1).Obj(),
			job:  rtt.MakeTrainJob("ns", "job").Obj(),
			want: []rtt.FieldErr{{Type: field.ErrorTypeInvalid, Field: "spec.trainer.numNodes"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			info, err := runtime.NewInfo(tc.job, tc.rt)
			if err != nil {
				t.Fatalf("NewInfo: %v", err)
			}
			got := jobset.New().Validate(info, nil, tc.job)
			if diff := cmp.Diff(tc.want, rtt.FieldErrs(got)); diff != "" {
				t.Errorf("Validate (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStatus(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Hour))
	spec := jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{
		{Name: "dataset-initializer"}, {Name: "model-initializer"}, {Name: "node"},
	}}
	cond := func(typ string, s metav1.ConditionStatus, reason, msg string, at metav1.Time) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg, LastTransitionTime: at}
	}
	rjs := func(name string, ready, succeeded, failed, active, suspended int32) jobsetv1alpha2.ReplicatedJobStatus {
		return jobsetv1alpha2.ReplicatedJobStatus{Name: name, Ready: ready, Succeeded: succeeded, Failed: failed, Active: active, Suspended: suspended}
	}
	js := func(name string, ready, succeeded, failed, active, suspended int32) trainer.JobStatus {
		return trainer.JobStatus{Name: name, Ready: ptr.To(ready), Succeeded: ptr.To(succeeded), Failed: ptr.To(failed), Active: ptr.To(active), Suspended: ptr.To(suspended)}
	}
	cases := map[string]struct {
		jobSet *jobsetv1alpha2.JobSet
		status trainer.TrainJobStatus
		want   trainer.TrainJobStatus
	}{
		"no JobSet leaves the status alone": {
			status: trainer.TrainJobStatus{
				Conditions: []metav1.Condition{cond("Created", metav1.ConditionFalse, "BuildFailed", "boom", t0)},
				JobsStatus: []trainer.JobStatus{js("node", 1, 0, 0, 1, 0)},
			},
			want: trainer.TrainJobStatus{
				Conditions: []metav1.Condition{cond("Created", metav1.ConditionFalse, "BuildFailed", "boom", t0)},
				JobsStatus: []trainer.JobStatus{js("node", 1, 0, 0, 1, 0)},
			},
		},
		"running JobSet: no terminal condition, counts copied": {
			jobSet: &jobsetv1alpha2.JobSet{Spec: spec, Status: jobsetv1alpha2.JobSetStatus{
				Conditions: []metav1.Condition{
					cond("StartupPolicyCompleted", metav1.ConditionTrue, "Started", "", t0),
					cond("Suspended", metav1.ConditionFalse, "ResumeJobs", "", t0),
				},
				ReplicatedJobsStatus: []jobsetv1alpha2.ReplicatedJobStatus{rjs("node", 1, 0, 0, 1, 0)},
			}},
			want: trainer.TrainJobStatus{JobsStatus: []trainer.JobStatus{js("node", 1, 0, 0, 1, 0)}},
		},
		"Completed becomes Complete with reason and message verbatim": {
			jobSet: &jobsetv1alpha2.JobSet{Spec: spec, Status: jobsetv1alpha2.JobSetStatus{
				Conditions: []metav1.Condition{
					cond("Completed", metav1.ConditionTrue, "AllJobsCompleted", "jobset completed successfully", t1),
				},
			}},
			status: trainer.TrainJobStatus{Conditions: []metav1.Condition{cond("Created", metav1.ConditionTrue, "JobSetCreated", "ok", t0)}},
			want: trainer.TrainJobStatus{Conditions: []metav1.Condition{
				cond("Created", metav1.ConditionTrue, "JobSetCreated", "ok", t0),
				cond("Complete", metav1.ConditionTrue, "AllJobsCompleted", "jobset completed successfully", t1),
			}},
		},
		"Failed becomes Failed with reason and message verbatim": {
			jobSet: &jobsetv1alpha2.JobSet{Spec: spec, Status: jobsetv1alpha2.JobSetStatus{
				Conditions: []metav1.Condition{
					cond("Failed", metav1.ConditionTrue, "FailedJobs", `jobset failed due to: job "x" failed: BackoffLimitExceeded`, t1),
				},
			}},
			want: trainer.TrainJobStatus{Conditions: []metav1.Condition{
				cond("Failed", metav1.ConditionTrue, "FailedJobs", `jobset failed due to: job "x" failed: BackoffLimitExceeded`, t1),
			}},
		},
		"a terminal condition that is not true is not copied": {
			jobSet: &jobsetv1alpha2.JobSet{Spec: spec, Status: jobsetv1alpha2.JobSetStatus{
				Conditions: []metav1.Condition{
					cond("Completed", metav1.ConditionFalse, "NotYet", "", t0),
					cond("Failed", metav1.ConditionUnknown, "Unknown", "", t0),
				},
			}},
			want: trainer.TrainJobStatus{},
		},
		"an existing terminal condition is not overwritten": {
			jobSet: &jobsetv1alpha2.JobSet{Spec: spec, Status: jobsetv1alpha2.JobSetStatus{
				Conditions: []metav1.Condition{
					cond("Failed", metav1.ConditionTrue, "FailedJobs", "later failure", t1),
				},
			}},
			status: trainer.TrainJobStatus{Conditions: []metav1.Condition{
				cond("Failed", metav1.ConditionTrue, "DeadlineExceeded", "first failure", t0),
			}},
			want: trainer.TrainJobStatus{Conditions: []metav1.Condition{
				cond("Failed", metav1.ConditionTrue, "DeadlineExceeded", "first failure", t0),
			}},
		},
		"an existing Complete stays as first observed": {
			jobSet: &jobsetv1alpha2.JobSet{Spec: spec, Status: jobsetv1alpha2.JobSetStatus{
				Conditions: []metav1.Condition{cond("Completed", metav1.ConditionTrue, "AllJobsCompleted", "new message", t1)},
			}},
			status: trainer.TrainJobStatus{Conditions: []metav1.Condition{cond("Complete", metav1.ConditionTrue, "AllJobsCompleted", "old message", t0)}},
			want:   trainer.TrainJobStatus{Conditions: []metav1.Condition{cond("Complete", metav1.ConditionTrue, "AllJobsCompleted", "old message", t0)}},
		},
		"a false condition of the same type is replaced in place": {
			jobSet: &jobsetv1alpha2.JobSet{Spec: spec, Status: jobsetv1alpha2.JobSetStatus{
				Conditions: []metav1.Condition{cond("Failed", metav1.ConditionTrue, "FailedJobs", "boom", t1)},
			}},
			status: trainer.TrainJobStatus{Conditions: []metav1.Condition{
				cond("Failed", metav1.ConditionFalse, "Old", "", t0),
				cond("Suspended", metav1.ConditionFalse, "Resumed", "resumed", t0),
			}},
			want: trainer.TrainJobStatus{Conditions: []metav1.Condition{
				cond("Failed", metav1.ConditionTrue, "FailedJobs", "boom", t1),
				cond("Suspended", metav1.ConditionFalse, "Resumed", "resumed", t0),
			}},
		},
		"jobsStatus follows the JobSet's replicated job order and replaces the old list": {
			jobSet: &jobsetv1alpha2.JobSet{Spec: spec, Status: jobsetv1alpha2.JobSetStatus{
				ReplicatedJobsStatus: []jobsetv1alpha2.ReplicatedJobStatus{
					rjs("node", 2, 0, 1, 2, 0),
					rjs("gone", 9, 9, 9, 9, 9),
					rjs("dataset-initializer", 0, 1, 0, 0, 0),
				},
			}},
			status: trainer.TrainJobStatus{JobsStatus: []trainer.JobStatus{js("stale", 1, 1, 1, 1, 1)}},
			want: trainer.TrainJobStatus{JobsStatus: []trainer.JobStatus{
				js("dataset-initializer", 0, 1, 0, 0, 0),
				js("node", 2, 0, 1, 2, 0),
			}},
		},
		"a JobSet with no status clears jobsStatus": {
			jobSet: &jobsetv1alpha2.JobSet{Spec: spec},
			status: trainer.TrainJobStatus{JobsStatus: []trainer.JobStatus{js("node", 1, 1, 1, 1, 1)}, Phase: trainer.TrainJobRunning},
			want:   trainer.TrainJobStatus{Phase: trainer.TrainJobRunning},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := rtt.MakeTrainJob("ns", "job").Obj()
			status := *tc.status.DeepCopy()
			var jsBefore *jobsetv1alpha2.JobSet
			if tc.jobSet != nil {
				jsBefore = tc.jobSet.DeepCopy()
			}
			obs := &observe.Observed{}
			var seen *jobsetv1alpha2.JobSet
			if tc.jobSet != nil {
				seen = tc.jobSet.DeepCopy()
				seen.Name = job.Name
				obs.Children = childsync.Children{{GroupKind: observe.JobSetKind, Name: job.Name}: seen}
			}
			jobset.New().Status(job, obs, &status)
			if diff := cmp.Diff(tc.want, status); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if seen != nil {
				seen.Name = jsBefore.Name
			}
			if diff := cmp.Diff(jsBefore, seen); diff != "" {
				t.Errorf("Status changed the JobSet (-before +after):\n%s", diff)
			}
		})
	}
}

// withHostnames sets a host name in every pod template of rt, as a
// PyTorchJob's runtime does (v1's <job>-<replica type>-<index>).
func withHostnames(rt *runtime.Runtime) *runtime.Runtime {
	for k := range rt.Spec.Template.Spec.ReplicatedJobs {
		rt.Spec.Template.Spec.ReplicatedJobs[k].Template.Spec.Template.Spec.Hostname = fmt.Sprintf("host-%d", k)
	}
	return rt
}

// TestFinished: the first True terminal condition of the JobSet, the one rule
// every job kind's status follows.
func TestFinished(t *testing.T) {
	cond := func(t jobsetv1alpha2.JobSetConditionType, s metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: string(t), Status: s, Reason: string(t) + "Reason"}
	}
	cases := map[string]struct {
		conds  []metav1.Condition
		want   string
		wantOK bool
	}{
		"running":                 {conds: []metav1.Condition{cond(jobsetv1alpha2.JobSetStartupPolicyCompleted, metav1.ConditionTrue)}},
		"completed":               {conds: []metav1.Condition{cond(jobsetv1alpha2.JobSetCompleted, metav1.ConditionTrue)}, want: "Completed", wantOK: true},
		"failed, completed False": {conds: []metav1.Condition{cond(jobsetv1alpha2.JobSetCompleted, metav1.ConditionFalse), cond(jobsetv1alpha2.JobSetFailed, metav1.ConditionTrue)}, want: "Failed", wantOK: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			js := &jobsetv1alpha2.JobSet{Status: jobsetv1alpha2.JobSetStatus{Conditions: tc.conds}}
			c, ok := jobset.Finished(js)
			if ok != tc.wantOK || c.Type != tc.want {
				t.Errorf("Finished = %q, %v; want %q, %v", c.Type, ok, tc.want, tc.wantOK)
			}
		})
	}
	if _, ok := jobset.Finished(nil); ok {
		t.Error("Finished(nil) = true")
	}
}
