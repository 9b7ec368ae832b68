package controller

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueueapi "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/kueue"
	"github.com/trainyard/trainyard/test/integration/framework"
)

// workloadFor creates the Kueue Workload that Kueue would create for owner, and
// returns a function that sets its conditions.
func workloadFor(t *testing.T, owner client.Object, gvk schema.GroupVersionKind) func(...metav1.Condition) {
	t.Helper()
	wl := &kueueapi.Workload{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: owner.GetNamespace(), Name: "wl-" + owner.GetName(),
			Labels:          map[string]string{"kueue.x-k8s.io/job-uid": string(owner.GetUID())},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: owner.GetName(), UID: owner.GetUID(), Controller: ptr.To(true)}},
		},
		Spec: kueueapi.WorkloadSpec{QueueName: "team-a", PodSets: []kueueapi.PodSet{{Name: "node", Count: 2, Template: podTemplateForWorkload()}}},
	}
	require.NoError(t, env.Client.Create(ctx(), wl))
	return func(conds ...metav1.Condition) {
		eventually(t, func() error {
			var cur kueueapi.Workload
			if err := env.Client.Get(ctx(), client.ObjectKeyFromObject(wl), &cur); err != nil {
				return err
			}
			for i := range conds {
				conds[i].LastTransitionTime = metav1.Now()
			}
			cur.Status.Conditions = conds
			return env.Client.Status().Update(ctx(), &cur)
		})
	}
}

func podTemplateForWorkload() corev1.PodTemplateSpec {
	var p corev1.PodTemplateSpec
	p.Spec.Containers = []corev1.Container{{Name: "node", Image: "busybox"}}
	return p
}

func cond(t, status, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: t, Status: metav1.ConditionStatus(status), Reason: reason, Message: msg}
}

const (
	waitingMsg  = "couldn't assign flavors to pod set node: insufficient unused quota for nvidia.com/gpu in flavor gpu, 2 more needed"
	tooLargeMsg = "couldn't assign flavors to pod set node: insufficient quota for nvidia.com/gpu in flavor gpu, previously considered podsets requests (0) + current podset request (8) > maximum capacity (4)"
)

// With Kueue's TrainJob integration: Kueue suspends the TrainJob while it is
// queued; the TrainJob shows Pending with Kueue's reason (waiting for quota, or
// never fitting), runs when admitted with Kueue's placement, and shows
// Preempted when Kueue suspends it again.
func TestKueueTrainJobMode(t *testing.T) {
	ns := newNamespace(t)
	applyFile(t, ns, "runtimes/torch-distributed.yaml")
	job := torchJob(ns, "queued", func(j *trainer.TrainJob) {
		j.Labels = map[string]string{kueue.QueueNameLabel: "team-a"}
		j.Spec.Suspend = ptr.To(true) // what Kueue's TrainJob webhook does on creation
		j.Spec.Trainer.NumNodes = ptr.To[int32](2)
	})
	require.NoError(t, env.Client.Create(ctx(), job))
	js := waitJobSetSuspended(t, ns, "queued", true)
	require.NotContains(t, js.Labels, kueue.QueueNameLabel, "the JobSet must not be queued a second time")

	setWL := workloadFor(t, job, trainer.GroupVersion.WithKind(trainer.TrainJobKind))
	setWL(cond(kueueapi.WorkloadQuotaReserved, "False", "Pending", waitingMsg))
	waitGet(t, ns, "queued", map[string]string{"State": "Pending", "Reason": "WaitingForQuota",
		"Message": "waiting in LocalQueue team-a: " + waitingMsg})

	setWL(cond(kueueapi.WorkloadQuotaReserved, "False", "Pending", tooLargeMsg))
	waitGet(t, ns, "queued", map[string]string{"State": "Pending", "Reason": "ExceedsQueueCapacity"})
	require.Contains(t, kubectlGet(t, ns, "queued")["Message"], "can never fit LocalQueue team-a as its quota stands")
	waitEvent(t, ns, "queued", "ExceedsQueueCapacity")

	// Admission: Kueue writes its placement as a podTemplateOverride and resumes.
	setWL(cond(kueueapi.WorkloadQuotaReserved, "True", "QuotaReserved", ""), cond(kueueapi.WorkloadAdmitted, "True", "Admitted", ""))
	waitGet(t, ns, "queued", map[string]string{"State": "Pending", "Reason": "Admitted"}) // until Kueue resumes it
	patchTrainJob(t, ns, "queued", func(j *trainer.TrainJob) {
		j.Spec.PodTemplateOverrides = []trainer.PodTemplateOverride{{
			TargetJobs: []trainer.PodTemplateOverrideTargetJob{{Name: "node"}},
			Metadata:   &metav1.ObjectMeta{Labels: map[string]string{"kueue.x-k8s.io/podset": "node"}},
			Spec:       &trainer.PodTemplateSpecOverride{NodeSelector: map[string]string{"trainyard.io/pool": "gpu"}},
		}}
		j.Spec.Suspend = ptr.To(false)
	})
	js = waitJobSetSuspended(t, ns, "queued", false)
	require.Equal(t, "gpu", js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.NodeSelector["trainyard.io/pool"])
	waitGet(t, ns, "queued", map[string]string{"State": "Pending", "Reason": "WaitingForPods"})

	// Preemption: Kueue evicts, suspends and takes its placement back.
	setWL(cond(kueueapi.WorkloadQuotaReserved, "False", "Pending", waitingMsg),
		cond(kueueapi.WorkloadEvicted, "True", kueueapi.WorkloadEvictedByPreemption, "Preempted to accommodate a workload (UID: x) due to prioritization in the ClusterQueue"))
	patchTrainJob(t, ns, "queued", func(j *trainer.TrainJob) {
		j.Spec.Suspend = ptr.To(true)
		j.Spec.PodTemplateOverrides = nil
	})
	waitJobSetSuspended(t, ns, "queued", true)
	waitGet(t, ns, "queued", map[string]string{"State": "Pending", "Reason": "Preempted"})
	waitEvent(t, ns, "queued", "Preempted")
}

// Without Kueue's TrainJob integration: the JobSet carries the queue and
// priority labels, starts suspended, and Kueue alone starts, places and stops
// it; Trainyard never fights over it.
func TestKueueJobSetMode(t *testing.T) {
	env.StopManager()
	require.NoError(t, env.StartManager(framework.ManagerOptions{KueueMode: kueue.ModeJobSet}))
	t.Cleanup(func() {
		env.StopManager()
		require.NoError(t, env.StartManager(framework.ManagerOptions{}))
	})
	ns := newNamespace(t)
	applyFile(t, ns, "runtimes/torch-distributed.yaml")
	require.NoError(t, env.Client.Create(ctx(), torchJob(ns, "handed", func(j *trainer.TrainJob) {
		j.Labels = map[string]string{kueue.QueueNameLabel: "team-a", kueue.PriorityClassLabel: "high"}
	})))
	js := waitJobSetSuspended(t, ns, "handed", true)
	require.Equal(t, "team-a", js.Labels[kueue.QueueNameLabel])
	require.Equal(t, "high", js.Labels[kueue.PriorityClassLabel])
	waitGet(t, ns, "handed", map[string]string{"State": "Pending", "Reason": "WaitingForJobSet"})

	setWL := workloadFor(t, js, jobsetv1alpha2.GroupVersion.WithKind("JobSet"))
	setWL(cond(kueueapi.WorkloadQuotaReserved, "False", "Pending", waitingMsg))
	waitGet(t, ns, "handed", map[string]string{"State": "Pending", "Reason": "WaitingForQuota"})

	// Kueue admits: it unsuspends the JobSet and injects the flavor's node selector.
	setWL(cond(kueueapi.WorkloadQuotaReserved, "True", "QuotaReserved", ""), cond(kueueapi.WorkloadAdmitted, "True", "Admitted", ""))
	waitGet(t, ns, "handed", map[string]string{"State": "Pending", "Reason": "Admitted"}) // until Kueue unsuspends the JobSet
	eventually(t, func() error {
		var cur jobsetv1alpha2.JobSet
		if err := env.Client.Get(ctx(), client.ObjectKeyFromObject(js), &cur); err != nil {
			return err
		}
		cur.Spec.Suspend = ptr.To(false)
		cur.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.NodeSelector = map[string]string{"trainyard.io/pool": "gpu"}
		return env.Client.Update(ctx(), &cur)
	})
	waitGet(t, ns, "handed", map[string]string{"State": "Pending", "Reason": "WaitingForPods"})
	consistently(t, 2*time.Second, func() error {
		var cur jobsetv1alpha2.JobSet
		if err := env.Client.Get(ctx(), client.ObjectKeyFromObject(js), &cur); err != nil {
			return err
		}
		if ptr.Deref(cur.Spec.Suspend, false) || cur.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.NodeSelector["trainyard.io/pool"] != "gpu" {
			return fmt.Errorf("Trainyard changed the admitted JobSet: suspend=%v nodeSelector=%v", cur.Spec.Suspend,
				cur.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.NodeSelector)
		}
		return nil
	})

	// Kueue preempts: it suspends the JobSet and restores its template; Trainyard
	// leaves it suspended and reports the preemption.
	setWL(cond(kueueapi.WorkloadQuotaReserved, "False", "Pending", waitingMsg),
		cond(kueueapi.WorkloadEvicted, "True", kueueapi.WorkloadEvictedByPreemption, "Preempted to accommodate a higher priority workload"))
	eventually(t, func() error {
		var cur jobsetv1alpha2.JobSet
		if err := env.Client.Get(ctx(), client.ObjectKeyFromObject(js), &cur); err != nil {
			return err
		}
		cur.Spec.Suspend = ptr.To(true)
		cur.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.NodeSelector = nil
		return env.Client.Update(ctx(), &cur)
	})
	waitGet(t, ns, "handed", map[string]string{"State": "Pending", "Reason": "Preempted"})
	consistently(t, 2*time.Second, func() error {
		var cur jobsetv1alpha2.JobSet
		if err := env.Client.Get(ctx(), client.ObjectKeyFromObject(js), &cur); err != nil {
			return err
		}
		if !ptr.Deref(cur.Spec.Suspend, false) {
			return fmt.Errorf("Trainyard unsuspended a JobSet that Kueue suspended")
		}
		return nil
	})
}

func waitEvent(t *testing.T, ns, name, reason string) {
	t.Helper()
	framework.WaitEvent(t, env.Client, ns, name, reason)
}
