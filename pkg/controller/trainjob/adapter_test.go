package trainjob

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/observe"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
	rtt "github.com/trainyard/trainyard/test/util/rtt"
)

func TestAdapterKind(t *testing.T) {
	a := &Adapter{}
	if got := a.Kind(); got != trainer.TrainJobKind {
		t.Errorf("Kind() = %q, want %q", got, trainer.TrainJobKind)
	}
	if diff := cmp.Diff(&trainer.TrainJob{}, a.New()); diff != "" {
		t.Errorf("New() (-want +got):\n%s", diff)
	}
	cases := map[string]struct {
		managedBy *string
		want      bool
	}{
		"no managedBy":       {nil, true},
		"managed by Trainer": {ptr.To(trainer.TrainJobControllerName), true},
		"managed by another": {ptr.To(trainer.MultiKueueControllerName), false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := newJob(func(j *trainer.TrainJob) { j.Spec.ManagedBy = tc.managedBy })
			if got := a.Ours(job); got != tc.want {
				t.Errorf("Ours() = %v, want %v", got, tc.want)
			}
		})
	}
}

// torchRuntime is the torch-distributed runtime with the trainer image set.
func torchRuntime(image string) *runtime.Runtime {
	w := rtt.MakeTorchRuntime(rtt.TorchDistributed)
	w.Spec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].Image = image
	return w.Obj()
}

func TestPlan(t *testing.T) {
	scheme := k8sruntime.NewScheme()
	if err := trainer.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	live := &trainer.ClusterTrainingRuntime{
		ObjectMeta: metav1.ObjectMeta{Name: rtt.TorchDistributed, UID: "live-uid", Generation: 3},
		Spec:       torchRuntime("live:1").Spec,
	}
	snap, err := torchRuntime("snapshot:1").Encode()
	if err != nil {
		t.Fatal(err)
	}
	// noJobs is a snapshot the pipeline rejects: a runtime without replicated jobs.
	noJobsRT := torchRuntime("x")
	noJobsRT.Spec.Template.Spec.ReplicatedJobs = nil
	noJobs, err := noJobsRT.Encode()
	if err != nil {
		t.Fatal(err)
	}
	withSnapshot := func(s string) *observe.Observed {
		return observed(jobSet(t, false, func(js *jobsetv1alpha2.JobSet) { js.Annotations[SnapshotAnnotation] = s }))
	}
	withoutSnapshot := observed(jobSet(t, false, func(js *jobsetv1alpha2.JobSet) { delete(js.Annotations, SnapshotAnnotation) }))

	// planned is what the tests compare of a plan.
	type planned struct {
		Nil       bool
		Suspend   bool   // the plan's and its JobSet's
		Image     string // of the trainer container
		Snapshot  string // kind/name/image of the runtime in the JobSet's snapshot annotation
		NumNodes  int32
		ErrIs     error
		Invalid   []rtt.FieldErr
		ErrString string
	}
	cases := map[string]struct {
		job     *trainer.TrainJob
		obs     *observe.Observed
		objects []client.Object
		want    planned
	}{
		"a complete job gets no plan": {
			job: newJob(withStatus(trainer.TrainJobStatus{Conditions: []metav1.Condition{
				cond(trainer.TrainJobComplete, metav1.ConditionTrue, "AllJobsCompleted", "done")}})),
			objects: []client.Object{live},
			want:    planned{Nil: true},
		},
		"a failed job gets no plan": {
			job: newJob(withStatus(trainer.TrainJobStatus{Conditions: []metav1.Condition{
				cond(trainer.TrainJobFailed, metav1.ConditionTrue, "FailedJobs", "failed")}})),
			objects: []client.Object{live},
			want:    planned{Nil: true},
		},
		"a job past activeDeadlineSeconds gets no plan": {
			job:     newJob(activeDeadline(600)), // due exactly at tNow
			objects: []client.Object{live},
			want:    planned{Nil: true},
		},
		"a job before its deadline is planned": {
			job:     newJob(activeDeadline(601)),
			objects: []client.Object{live},
			want:    planned{Image: "live:1", Snapshot: "ClusterTrainingRuntime/torch-distributed/live:1", NumNodes: 2},
		},
		"a suspended job has no deadline": {
			job:     newJob(activeDeadline(60), suspended(true)),
			objects: []client.Object{live},
			want:    planned{Suspend: true, Image: "live:1", Snapshot: "ClusterTrainingRuntime/torch-distributed/live:1", NumNodes: 2},
		},
		"live runtime when there is no JobSet": {
			job:     newJob(),
			objects: []client.Object{live},
			want:    planned{Image: "live:1", Snapshot: "ClusterTrainingRuntime/torch-distributed/live:1", NumNodes: 2},
		},
		"snapshot of the observed JobSet, not the live runtime": {
			job:     newJob(),
			obs:     withSnapshot(snap),
			objects: []client.Object{live},
			want:    planned{Image: "snapshot:1", Snapshot: "ClusterTrainingRuntime/torch-distributed/snapshot:1", NumNodes: 2},
		},
		"snapshot even when the live runtime is gone": {
			job:  newJob(),
			obs:  withSnapshot(snap),
			want: planned{Image: "snapshot:1", Snapshot: "ClusterTrainingRuntime/torch-distributed/snapshot:1", NumNodes: 2},
		},
		"a JobSet without snapshot: live runtime": {
			job:     newJob(),
			obs:     withoutSnapshot,
			objects: []client.Object{live},
			want:    planned{Image: "live:1", Snapshot: "ClusterTrainingRuntime/torch-distributed/live:1", NumNodes: 2},
		},
		"an unreadable snapshot: live runtime": {
			job:     newJob(),
			obs:     withSnapshot(`{"kind":`),
			objects: []client.Object{live},
			want:    planned{Image: "live:1", Snapshot: "ClusterTrainingRuntime/torch-distributed/live:1", NumNodes: 2},
		},
		"runtime not found": {
			job:  newJob(),
			want: planned{ErrIs: runtime.ErrNotFound},
		},
		"unsupported runtime kind": {
			job:  newJob(func(j *trainer.TrainJob) { j.Spec.RuntimeRef.Kind = ptr.To("MPIJob") }),
			want: planned{ErrIs: runtime.ErrUnsupported},
		},
		"a name starting with a digit is invalid": {
			job:     newJob(func(j *trainer.TrainJob) { j.Name = "1job" }),
			objects: []client.Object{live},
			want:    planned{Invalid: []rtt.FieldErr{{Type: field.ErrorTypeInvalid, Field: "metadata.name"}}},
		},
		"a snapshot the pipeline rejects is invalid": {
			job: newJob(),
			obs: withSnapshot(noJobs),
			// The torch plugin and the JobSet plugin both reject it.
			want: planned{Invalid: []rtt.FieldErr{
				{Type: field.ErrorTypeInvalid, Field: "spec.runtimeRef"},
				{Type: field.ErrorTypeInvalid, Field: "spec.runtimeRef"},
				{Type: field.ErrorTypeInvalid, Field: "spec.trainer"},
			}},
		},
	}
	a := newAdapter(t)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obs := tc.obs
			if obs == nil {
				obs = observed(nil)
			}
			r := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tc.objects...).Build()
			before := tc.job.DeepCopy()
			p, err := planPass(t, a, r, tc.job, obs, tNow)
			if diff := cmp.Diff(before, tc.job); diff != "" {
				t.Errorf("Plan changed the job (-before +after):\n%s", diff)
			}
			var got planned
			switch {
			case err != nil:
				if p != nil {
					t.Errorf("Plan returned both a plan and error %v", err)
				}
				var ie *framework.InvalidError
				switch {
				case tc.want.ErrIs != nil && errors.Is(err, tc.want.ErrIs):
					got.ErrIs = tc.want.ErrIs
				case errors.As(err, &ie):
					got.Invalid = rtt.FieldErrsOf(err)
				default:
					got.ErrString = err.Error()
				}
			case p == nil:
				got.Nil = true
			default:
				js := p.JobSet()
				if js == nil {
					t.Fatal("the plan has no JobSet")
				}
				got.Suspend = p.Suspended
				if ptr.Deref(js.Spec.Suspend, false) != p.Suspended {
					t.Errorf("JobSet suspend = %v, plan suspended = %v", ptr.Deref(js.Spec.Suspend, false), p.Suspended)
				}
				if c := runtime.TrainerContainer(&js.Spec); c != nil {
					got.Image = c.Image
				}
				if rj := runtime.TrainerJob(&js.Spec); rj != nil {
					got.NumNodes = ptr.Deref(rj.Template.Spec.Parallelism, 0)
				}
				s, ok := js.Annotations[SnapshotAnnotation]
				if !ok {
					t.Fatalf("the plan's JobSet has no %s annotation", SnapshotAnnotation)
				}
				rt, err := runtime.DecodeRuntime(s)
				if err != nil {
					t.Fatalf("decoding the plan's snapshot: %v", err)
				}
				got.Snapshot = rt.Kind + "/" + rt.Name
				if c := runtime.TrainerContainer(&rt.Spec.Template.Spec); c != nil {
					got.Snapshot += "/" + c.Image
				}
			}
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b error) bool { return a == b })); diff != "" {
				t.Errorf("Plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPlanSnapshotIsTheLiveRuntime: the snapshot a new JobSet carries is the
// live runtime as read (kind, name, uid, generation and spec), so that a later
// pass renders the same JobSet from it.
func TestPlanSnapshotIsTheLiveRuntime(t *testing.T) {
	scheme := k8sruntime.NewScheme()
	if err := trainer.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	live := &trainer.ClusterTrainingRuntime{
		ObjectMeta: metav1.ObjectMeta{Name: rtt.TorchDistributed, UID: "live-uid", Generation: 3},
		Spec:       torchRuntime("live:1").Spec,
	}
	r := fake.NewClientBuilder().WithScheme(scheme).WithObjects(live).Build()
	a := newAdapter(t)
	job := newJob()
	p, err := planPass(t, a, r, job, observed(nil), tNow)
	if err != nil {
		t.Fatal(err)
	}
	got, err := runtime.DecodeRuntime(p.JobSet().Annotations[SnapshotAnnotation])
	if err != nil {
		t.Fatal(err)
	}
	want := &runtime.Runtime{Kind: trainer.ClusterTrainingRuntimeKind, Name: rtt.TorchDistributed, UID: "live-uid", Generation: 3, Spec: live.Spec}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("snapshot (-want +got):\n%s", diff)
	}

	// The next pass, with the JobSet observed and the runtime edited, plans
	// the same JobSet.
	edited := live.DeepCopy()
	edited.Spec = torchRuntime("edited:2").Spec
	r2 := fake.NewClientBuilder().WithScheme(scheme).WithObjects(edited).Build()
	p2, err := planPass(t, a, r2, job, observed(p.JobSet()), tNow)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(p.JobSet(), p2.JobSet()); diff != "" {
		t.Errorf("JobSet planned from the snapshot differs (-first +second):\n%s", diff)
	}
}
