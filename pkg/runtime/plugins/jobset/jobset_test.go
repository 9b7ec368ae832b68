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
	"github.com/trainyard/trainyard/pkg/observe"
	"github.com/trainyard/trainyard/pkg/plan"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/jobset"
	rtt "github.com/trainyard/trainyard/test/util/rtt"
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
			info, err := runtime.NewInfo(runtime.TrainJobRequest(tc.job), tc.rt)
			if err != nil {
				t.Fatalf("NewInfo: %v", err)
			}
			before := *info.Spec.DeepCopy()
			children, err := jobset.New().Build(info, runtime.TrainJobRequest(tc.job))
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
			info, err := runtime.NewInfo(runtime.TrainJobRequest(tc.job), tc.rt)
			if err != nil {
				t.Fatalf("NewInfo: %v", err)
			}
			got := jobset.New().Validate(info, runtime.TrainJobRequest(tc.job))
			if diff := cmp.Diff(tc.want, rtt.FieldErrs(got)); diff != "" {
				t.Errorf("Validate (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStatus: the plugin tells how the JobSet named after the job finished,
// and its counts, as observe reads them; without a JobSet, nothing.
func TestStatus(t *testing.T) {
	at := metav1.NewTime(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
	js := &jobsetv1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Name: "job"},
		Spec:       jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{Name: "init"}, {Name: "node"}}},
		Status: jobsetv1alpha2.JobSetStatus{
			Conditions: []metav1.Condition{{Type: string(jobsetv1alpha2.JobSetFailed), Status: metav1.ConditionTrue,
				Reason: "FailedJobs", Message: "boom", LastTransitionTime: at}},
			ReplicatedJobsStatus: []jobsetv1alpha2.ReplicatedJobStatus{{Name: "node", Failed: 1}, {Name: "init", Succeeded: 1}},
		},
	}
	var got framework.Facts
	jobset.New().Status("job", rtt.ObservedJobSet(js), &got)
	want := framework.Facts{
		Finished: &observe.Finish{Failed: true, Reason: "FailedJobs", Message: "boom", Time: at},
		Jobs:     []observe.JobCounts{{Name: "init", Succeeded: 1}, {Name: "node", Failed: 1}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("facts (-want +got):\n%s", diff)
	}
	var none framework.Facts
	jobset.New().Status("other", rtt.ObservedJobSet(js), &none)
	if diff := cmp.Diff(framework.Facts{}, none); diff != "" {
		t.Errorf("facts without a JobSet (-want +got):\n%s", diff)
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
