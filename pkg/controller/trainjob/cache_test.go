package trainjob

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/childsync"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
	"github.com/trainyard/trainyard/pkg/observe"
)

// stripped is a JobSet as the manager's cache holds it (without pod specs).
func stripped(t *testing.T, js *jobsetv1alpha2.JobSet) *jobsetv1alpha2.JobSet {
	t.Helper()
	o, err := jobframework.StripJobSet(js.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	s := o.(*jobsetv1alpha2.JobSet)
	if s.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers != nil {
		t.Fatal("the cache transform left the pod spec")
	}
	return s
}

// TestStatusFromCachedJobSet: the cache keeps JobSets without their pod specs;
// every status a full JobSet gives, the cached one gives too.
func TestStatusFromCachedJobSet(t *testing.T) {
	counted := jsReplicated(jobsetv1alpha2.ReplicatedJobStatus{Name: "node", Ready: 1, Active: 1})
	done := jsCondition(jobsetv1alpha2.JobSetCompleted, "AllJobsCompleted", "jobset completed successfully", tNow)
	cases := map[string]struct {
		job  *trainer.TrainJob
		js   *jobsetv1alpha2.JobSet
		pods []corev1.Pod
	}{
		"waiting for pods":         {job: newJob(withStatus(waiting(0))), js: jobSet(t, false), pods: []corev1.Pod{readyPod(0)}},
		"running":                  {job: newJob(withStatus(waiting(1))), js: jobSet(t, false, counted), pods: []corev1.Pod{readyPod(0), readyPod(1)}},
		"all ready by the JobSet":  {job: newJob(withStatus(waiting(0))), js: jobSet(t, false, counted)},
		"complete":                 {job: newJob(withStatus(running(0))), js: jobSet(t, false, counted, done), pods: []corev1.Pod{donePod(0), donePod(1)}},
		"suspended by its JobSet":  {job: newJob(withStatus(waiting(0))), js: jobSet(t, true)},
		"suspended with its owner": {job: newJob(suspended(true)), js: jobSet(t, true)},
	}
	a := newAdapter(t)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			full, cached := observed(tc.js, tc.pods...), observed(stripped(t, tc.js), tc.pods...)
			want := runStatus(t, a, tc.job, full, synced(full, nil, nil), tNow)
			got := runStatus(t, a, tc.job, cached, synced(cached, nil, nil), tNow)
			if diff := cmp.Diff(want, got, statusOpts); diff != "" {
				t.Errorf("status from the cached JobSet (-full +cached):\n%s", diff)
			}
		})
	}
}

// TestPlanFromCachedJobSet: a suspended JobSet is re-rendered from the runtime
// snapshot on the cached JobSet, and childsync finds the rendering unchanged
// (it compares hashes, not pod specs): nothing is written.
func TestPlanFromCachedJobSet(t *testing.T) {
	scheme := k8sruntime.NewScheme()
	if err := trainer.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := jobsetv1alpha2.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	a := newAdapter(t)
	job := newJob(suspended(true))
	c := fake.NewClientBuilder().WithScheme(scheme).Build() // no runtime: only the snapshot can give the plan
	syncer := &childsync.Syncer{Client: c, FieldOwner: jobframework.FieldOwner}
	ctx := context.Background()

	// The pass that creates the JobSet, from the runtime.
	p, err := a.Render(job, torchRuntime("snapshot:1"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := syncer.Sync(ctx, job, p, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	created, ok := res.Children[childsync.Key{GroupKind: observe.JobSetKind, Name: job.Name}].(*jobsetv1alpha2.JobSet)
	if !ok || res.Action(observe.JobSetKind, job.Name) != childsync.Created {
		t.Fatalf("first pass: %v, want the JobSet created", res.Actions)
	}

	// A later pass sees the JobSet as the cache holds it.
	obs := observed(stripped(t, created))
	p, err = planPass(t, a, c, job, obs, tNow)
	if err != nil {
		t.Fatalf("Plan from the cached JobSet: %v", err)
	}
	res, err = syncer.Sync(ctx, job, p, obs.Children, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Actions) != 0 {
		t.Errorf("syncing against the cached JobSet wrote %v, want nothing", res.Actions)
	}
}
