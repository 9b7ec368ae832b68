// Package gang tests the coscheduling and Volcano PodGroups on a real
// kube-apiserver with both PodGroup CRDs installed (testdata/crds): the
// PodGroup each TrainJob gets, the pods tied to it, and the TrainJob's status
// while its gang waits.
package gang

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/childsync"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/coscheduling"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/volcano"
	"github.com/trainyard/trainyard/test/integration/framework"
	rtt "github.com/trainyard/trainyard/test/util/rtt"
)

var env *framework.Env

func TestMain(m *testing.M) {
	crds := filepath.Join(framework.RepoRoot(), "test", "integration", "gang", "testdata", "crds")
	framework.Main(m, &env, framework.Options{CRDPaths: []string{crds}}, framework.WithManager(framework.ManagerOptions{}))
}

func ctx() context.Context { return context.Background() }

// gangRuntime is a TrainingRuntime with a trainer job of 1 CPU per node.
func gangRuntime(ns string, policy trainer.PodGroupPolicySource, annotations map[string]string) *trainer.TrainingRuntime {
	w := rtt.MakeRuntime(trainer.TrainingRuntimeKind, "gang").TrainerResources(rtt.Requests("cpu", "1", "memory", "1Gi")).Annotations(annotations)
	rt := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gang"}, Spec: w.Obj().Spec}
	rt.Spec.MLPolicy = &trainer.MLPolicy{NumNodes: ptr.To[int32](1)}
	rt.Spec.PodGroupPolicy = &trainer.PodGroupPolicy{PodGroupPolicySource: policy}
	return rt
}

func gangJob(ns, name string, nodes int32, suspend bool) *trainer.TrainJob {
	return &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: "gang", Kind: ptr.To(trainer.TrainingRuntimeKind), APIGroup: ptr.To(trainer.GroupVersion.Group)},
			Trainer:    &trainer.Trainer{NumNodes: ptr.To(nodes)},
			Suspend:    ptr.To(suspend),
		},
	}
}

// waitPodGroup waits for the PodGroup of this kind and returns it.
func waitPodGroup(t *testing.T, gvk schema.GroupVersionKind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	pg := &unstructured.Unstructured{}
	pg.SetGroupVersionKind(gvk)
	framework.Eventually(t, func() error { return env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, pg) })
	return pg
}

// waitReason waits for the TrainJob's phase and reason, and returns it.
func waitReason(t *testing.T, ns, name string, phase trainer.TrainJobPhase, reason string) *trainer.TrainJob {
	t.Helper()
	var job trainer.TrainJob
	framework.Eventually(t, func() error {
		if err := env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, &job); err != nil {
			return err
		}
		if job.Status.Phase != phase || job.Status.Reason != reason {
			return fmt.Errorf("phase/reason %s/%s (%s), want %s/%s", job.Status.Phase, job.Status.Reason, job.Status.Message, phase, reason)
		}
		return nil
	})
	return &job
}

// checkOwned checks that the PodGroup is the TrainJob's controlled child.
func checkOwned(t *testing.T, pg *unstructured.Unstructured, job *trainer.TrainJob) {
	t.Helper()
	require.NoError(t, env.Client.Get(ctx(), client.ObjectKeyFromObject(job), job))
	if !metav1.IsControlledBy(pg, job) {
		t.Errorf("PodGroup owners %+v, want controlled by TrainJob %s", pg.GetOwnerReferences(), job.Name)
	}
}

func TestCoschedulingPodGroup(t *testing.T) {
	ns := framework.NewNamespace(t, env.Client, "cosched")
	require.NoError(t, env.Client.Create(ctx(), gangRuntime(ns, trainer.PodGroupPolicySource{
		Coscheduling: &trainer.CoschedulingPodGroupPolicySource{ScheduleTimeoutSeconds: ptr.To[int32](30)},
	}, nil)))
	job := gangJob(ns, "cs", 3, true)
	require.NoError(t, env.Client.Create(ctx(), job))

	pg := waitPodGroup(t, coscheduling.PodGroupGVK, ns, "cs")
	checkOwned(t, pg, job)
	wantSpec := map[string]any{"minMember": int64(3), "minResources": map[string]any{"cpu": "3", "memory": "3Gi"}, "scheduleTimeoutSeconds": int64(30)}
	if diff := cmp.Diff(wantSpec, pg.Object["spec"]); diff != "" {
		t.Errorf("PodGroup spec (-want +got):\n%s", diff)
	}
	var js jobsetv1alpha2.JobSet
	framework.Eventually(t, func() error { return env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "cs"}, &js) })
	for _, rj := range js.Spec.ReplicatedJobs {
		if got := rj.Template.Spec.Template.Labels[coscheduling.PodGroupLabel]; got != "cs" {
			t.Errorf("replicated job %s: pod label %s=%q, want cs", rj.Name, coscheduling.PodGroupLabel, got)
		}
	}

	// While the job is suspended, its PodGroup is kept as rendered.
	tamper(t, pg)
	framework.Eventually(t, func() error {
		now := waitPodGroup(t, coscheduling.PodGroupGVK, ns, "cs")
		if m, _, _ := unstructured.NestedInt64(now.Object, "spec", "minMember"); m != 3 {
			return fmt.Errorf("minMember %d, want 3 re-applied", m)
		}
		return nil
	})

	// Resumed, the job's pods wait for their gang: the TrainJob says so, not Running.
	require.NoError(t, env.Client.Patch(ctx(), job, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"suspend":false}}`))))
	got := waitReason(t, ns, "cs", trainer.TrainJobPending, "PodGroupPending")
	require.Contains(t, got.Status.Message, "PodGroup cs is Pending: 0/3 pods scheduled")

	// Once the scheduler has placed the gang, the pods speak for themselves.
	pg = waitPodGroup(t, coscheduling.PodGroupGVK, ns, "cs")
	require.NoError(t, unstructured.SetNestedField(pg.Object, map[string]any{"phase": "Scheduled", "scheduled": int64(3)}, "status"))
	require.NoError(t, env.Client.Status().Update(ctx(), pg))
	waitReason(t, ns, "cs", trainer.TrainJobPending, "WaitingForPods")
}

func TestVolcanoPodGroup(t *testing.T) {
	ns := framework.NewNamespace(t, env.Client, "volcano")
	rt := gangRuntime(ns, trainer.PodGroupPolicySource{
		Volcano: &trainer.VolcanoPodGroupPolicySource{NetworkTopology: &trainer.NetworkTopologySpec{Mode: "soft", HighestTierAllowed: ptr.To(1)}},
	}, map[string]string{volcano.QueueAnnotation: "research"})
	rt.Spec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.PriorityClassName = "high"
	createPriorityClass(t, "high")
	require.NoError(t, env.Client.Create(ctx(), rt))
	job := gangJob(ns, "vc", 2, false)
	require.NoError(t, env.Client.Create(ctx(), job))

	pg := waitPodGroup(t, volcano.PodGroupGVK, ns, "vc")
	checkOwned(t, pg, job)
	wantSpec := map[string]any{
		"minMember":         int64(2),
		"minResources":      map[string]any{"cpu": "2", "memory": "2Gi"},
		"queue":             "research",
		"priorityClassName": "high",
		"networkTopology":   map[string]any{"mode": "soft", "highestTierAllowed": int64(1)},
	}
	if diff := cmp.Diff(wantSpec, pg.Object["spec"]); diff != "" {
		t.Errorf("PodGroup spec (-want +got):\n%s", diff)
	}
	var js jobsetv1alpha2.JobSet
	framework.Eventually(t, func() error { return env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "vc"}, &js) })
	for _, rj := range js.Spec.ReplicatedJobs {
		if got := rj.Template.Spec.Template.Annotations[volcano.GroupNameAnnotation]; got != "vc" {
			t.Errorf("replicated job %s: pod annotation %s=%q, want vc", rj.Name, volcano.GroupNameAnnotation, got)
		}
	}

	// Volcano cannot place the gang: its reason and message reach the TrainJob.
	require.NoError(t, unstructured.SetNestedField(pg.Object, map[string]any{"phase": "Pending", "conditions": []any{map[string]any{
		"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
		"message":            "2/2 tasks in gang unschedulable: pod group is not ready, 2 Pending, 2 minAvailable",
		"lastTransitionTime": metav1.Now().UTC().Format("2006-01-02T15:04:05Z"),
	}}}, "status"))
	require.NoError(t, env.Client.Update(ctx(), pg))
	got := waitReason(t, ns, "vc", trainer.TrainJobPending, "NotEnoughResources")
	require.Contains(t, got.Status.Message, "PodGroup vc: 2/2 tasks in gang unschedulable")

	// A running job's PodGroup is left alone: a changed runtime never reaches it.
	tamper(t, waitPodGroup(t, volcano.PodGroupGVK, ns, "vc"))
	framework.Consistently(t, 2e9, func() error {
		now := waitPodGroup(t, volcano.PodGroupGVK, ns, "vc")
		if m, _, _ := unstructured.NestedInt64(now.Object, "spec", "minMember"); m != 7 {
			return fmt.Errorf("minMember %d: the running job's PodGroup was rewritten", m)
		}
		return nil
	})
}

// tamper sets a PodGroup's minMember to 7 and drops Trainyard's render hash,
// so that the syncer, were it to look, would find it changed.
func tamper(t *testing.T, pg *unstructured.Unstructured) {
	t.Helper()
	require.NoError(t, unstructured.SetNestedField(pg.Object, int64(7), "spec", "minMember"))
	ann := pg.GetAnnotations()
	delete(ann, childsync.RenderHashAnnotation)
	pg.SetAnnotations(ann)
	require.NoError(t, env.Client.Update(ctx(), pg))
}

// createPriorityClass creates a cluster-scoped PriorityClass, deleted when the
// test ends.
func createPriorityClass(t *testing.T, name string) {
	t.Helper()
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: 1000}
	require.NoError(t, env.Client.Create(ctx(), pc))
	t.Cleanup(func() { _ = env.Client.Delete(ctx(), pc) })
}

// With no admission webhook, a Volcano job whose PriorityClass does not exist
// says so in status, with the webhook's field error, and gets no children; once
// the class is created, the job is built without any edit of its own.
func TestVolcanoMissingPriorityClassInStatus(t *testing.T) {
	ns := framework.NewNamespace(t, env.Client, "volcano-pc")
	rt := gangRuntime(ns, trainer.PodGroupPolicySource{Volcano: &trainer.VolcanoPodGroupPolicySource{}}, nil)
	rt.Spec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.PriorityClassName = "later"
	require.NoError(t, env.Client.Create(ctx(), rt))
	require.NoError(t, env.Client.Create(ctx(), gangJob(ns, "pc", 2, false)))

	var job trainer.TrainJob
	framework.Eventually(t, func() error {
		if err := env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "pc"}, &job); err != nil {
			return err
		}
		c := meta.FindStatusCondition(job.Status.Conditions, trainer.TrainJobCreated)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != trainer.TrainJobBuildFailedReason {
			return fmt.Errorf("conditions %+v, want Created=False/%s", job.Status.Conditions, trainer.TrainJobBuildFailedReason)
		}
		return nil
	})
	c := meta.FindStatusCondition(job.Status.Conditions, trainer.TrainJobCreated)
	require.Contains(t, c.Message, `spec.templateSpec.priorityClassName: Invalid value: "later": PriorityClass "later" doesn't exist`)
	for _, obj := range []client.Object{&jobsetv1alpha2.JobSet{}, podGroup(volcano.PodGroupGVK)} {
		err := env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "pc"}, obj)
		require.Truef(t, client.IgnoreNotFound(err) == nil && err != nil, "%T exists (or %v) while the PriorityClass is missing", obj, err)
	}

	createPriorityClass(t, "later")
	// Nothing about the job changes, so it is looked at again after
	// LookupRecheck; then its JobSet and PodGroup exist and the error goes.
	deadline := time.Now().Add(jobframework.LookupRecheck + framework.Timeout)
	for {
		err := env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "pc"}, &job)
		if err == nil && meta.FindStatusCondition(job.Status.Conditions, trainer.TrainJobCreated) == nil && job.Status.Phase != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job not built %s after the PriorityClass was created: %v %+v", jobframework.LookupRecheck+framework.Timeout, err, job.Status)
		}
		time.Sleep(500 * time.Millisecond)
	}
	waitPodGroup(t, volcano.PodGroupGVK, ns, "pc")
}

func podGroup(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	pg := &unstructured.Unstructured{}
	pg.SetGroupVersionKind(gvk)
	return pg
}
