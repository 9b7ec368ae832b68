package pytorchjob

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/controller/pytorchjob"
)

// runPolicy.suspend: a job created suspended gets a suspended JobSet (and its
// Services); resuming starts it and restarts the deadline clock; suspending
// a running job suspends its JobSet and zeroes the active counts.
func TestSuspendResume(t *testing.T) {
	ns := newNamespace(t)
	require.NoError(t, c.Create(ctx(), mnistJob(ns, "pausy", func(j *kubeflowv1.PyTorchJob) { j.Spec.RunPolicy.Suspend = ptr.To(true) })))
	js := waitJobSetSuspended(t, ns, "pausy", true)
	job := waitCondition(t, ns, "pausy", kubeflowv1.JobSuspended, corev1.ConditionTrue, pytorchjob.ReasonSuspended)
	require.Equal(t, "PyTorchJob pausy is suspended.", pytorchjob.FindCondition(&job.Status, kubeflowv1.JobSuspended).Message)
	require.Equal(t, "Suspended", state(job))
	require.Nil(t, job.Status.StartTime, "a job that never ran has no start time")
	require.NoError(t, c.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "pausy-master-0"}, &corev1.Service{}))

	patchJob(t, ns, "pausy", func(j *kubeflowv1.PyTorchJob) { j.Spec.RunPolicy.Suspend = ptr.To(false) })
	resumed := waitJobSetSuspended(t, ns, "pausy", false)
	require.Equal(t, js.UID, resumed.UID, "resuming must not recreate the JobSet")
	job = waitCondition(t, ns, "pausy", kubeflowv1.JobSuspended, corev1.ConditionFalse, pytorchjob.ReasonResumed)
	require.Equal(t, "PyTorchJob pausy is resumed.", pytorchjob.FindCondition(&job.Status, kubeflowv1.JobSuspended).Message)
	require.NotNil(t, job.Status.StartTime)

	_, master := createPod(t, resumed, "master", 0)
	master(corev1.PodRunning)
	waitCondition(t, ns, "pausy", kubeflowv1.JobRunning, corev1.ConditionTrue, pytorchjob.ReasonRunning)
	waitCounts(t, ns, "pausy", map[kubeflowv1.ReplicaType]counts{"Master": {Active: 1}, "Worker": {}})

	patchJob(t, ns, "pausy", func(j *kubeflowv1.PyTorchJob) { j.Spec.RunPolicy.Suspend = ptr.To(true) })
	waitJobSetSuspended(t, ns, "pausy", true)
	job = waitCondition(t, ns, "pausy", kubeflowv1.JobRunning, corev1.ConditionFalse, pytorchjob.ReasonSuspended)
	require.True(t, pytorchjob.IsTrue(&job.Status, kubeflowv1.JobSuspended))
	// The pod still reports Running (no Job controller here), but a suspended
	// job has no active replicas: Kueue waits for that after preempting it.
	waitCounts(t, ns, "pausy", map[kubeflowv1.ReplicaType]counts{"Master": {}, "Worker": {}})

	// Each step was also an event, with v1's reasons.
	eventually(t, func() error {
		var list eventsv1.EventList
		if err := c.List(ctx(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		seen := map[string]int{}
		for _, e := range list.Items {
			if e.Regarding.Name == "pausy" && e.Regarding.Kind == "PyTorchJob" {
				seen[e.Reason]++
			}
		}
		for _, r := range []string{pytorchjob.ReasonSuspended, pytorchjob.ReasonResumed, "JobSetCreated"} {
			if seen[r] == 0 {
				return fmt.Errorf("no %s event (have %v)", r, seen)
			}
		}
		return nil
	})
}

// Kueue's kubeflow.org/pytorchjob integration: the job is created suspended
// with a queue label; on admission Kueue writes the flavor's node selector,
// tolerations and labels into every replica's template and unsuspends it; on
// preemption it suspends it and takes them back. Each step reaches the JobSet
// (updated in place while suspended), and status says what Kueue reads:
// Running=True is PodsReady, an active replica is IsActive, Succeeded is Finished.
func TestKueueAdmissionAndPreemption(t *testing.T) {
	ns := newNamespace(t)
	require.NoError(t, c.Create(ctx(), mnistJob(ns, "queued", func(j *kubeflowv1.PyTorchJob) {
		j.Labels = map[string]string{"kueue.x-k8s.io/queue-name": "gpu-queue"}
		j.Spec.RunPolicy.Suspend = ptr.To(true) // Kueue's webhook does this at creation
	})))
	js := waitJobSetSuspended(t, ns, "queued", true)
	require.NotContains(t, js.Labels, "kueue.x-k8s.io/queue-name", "Kueue must not queue the JobSet as well")

	// Admission: what kueue's podset.Merge writes, then suspend=false, in one update.
	patchJob(t, ns, "queued", func(j *kubeflowv1.PyTorchJob) {
		for _, rs := range j.Spec.PyTorchReplicaSpecs {
			rs.Template.Labels = map[string]string{"kueue.x-k8s.io/podset": "main"}
			rs.Template.Spec.NodeSelector = map[string]string{"cloud.example.com/accelerator": "a100"}
			rs.Template.Spec.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
		}
		j.Spec.RunPolicy.Suspend = ptr.To(false)
	})
	admitted := waitJobSetSuspended(t, ns, "queued", false)
	require.Equal(t, js.UID, admitted.UID, "admission changes only what JobSet lets change while suspended")
	for _, rj := range admitted.Spec.ReplicatedJobs {
		pod := rj.Template.Spec.Template
		require.Equal(t, "a100", pod.Spec.NodeSelector["cloud.example.com/accelerator"], rj.Name)
		require.Len(t, pod.Spec.Tolerations, 1, rj.Name)
		require.Equal(t, "main", pod.Labels["kueue.x-k8s.io/podset"], rj.Name)
		require.Equal(t, "queued", pod.Labels["training.kubeflow.org/job-name"], rj.Name)
	}

	_, master := createPod(t, admitted, "master", 0)
	master(corev1.PodRunning)
	waitCondition(t, ns, "queued", kubeflowv1.JobRunning, corev1.ConditionTrue, pytorchjob.ReasonRunning)
	waitCounts(t, ns, "queued", map[kubeflowv1.ReplicaType]counts{"Master": {Active: 1}, "Worker": {}})

	// Preemption: suspend, and restore the templates.
	patchJob(t, ns, "queued", func(j *kubeflowv1.PyTorchJob) {
		j.Spec.RunPolicy.Suspend = ptr.To(true)
		for _, rs := range j.Spec.PyTorchReplicaSpecs {
			rs.Template.Labels, rs.Template.Spec.NodeSelector, rs.Template.Spec.Tolerations = nil, nil, nil
		}
	})
	eventually(t, func() error {
		cur := waitJobSetSuspended(t, ns, "queued", true)
		if sel := cur.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.NodeSelector; len(sel) > 0 {
			return fmt.Errorf("node selector still %v", sel)
		}
		return nil
	})
	waitCounts(t, ns, "queued", map[kubeflowv1.ReplicaType]counts{"Master": {}, "Worker": {}})
	job := waitCondition(t, ns, "queued", kubeflowv1.JobSuspended, corev1.ConditionTrue, pytorchjob.ReasonSuspended)
	require.False(t, pytorchjob.IsTrue(&job.Status, kubeflowv1.JobRunning), "a preempted job is not PodsReady")
}

// cleanPodPolicy All deletes every pod and the Services once the job
// finished; ttlSecondsAfterFinished then deletes the job itself.
func TestCleanPodPolicyAllAndTTL(t *testing.T) {
	ns := newNamespace(t)
	require.NoError(t, c.Create(ctx(), mnistJob(ns, "tidy", func(j *kubeflowv1.PyTorchJob) {
		j.Spec.RunPolicy.CleanPodPolicy = ptr.To(kubeflowv1.CleanPodPolicyAll)
		j.Spec.RunPolicy.TTLSecondsAfterFinished = ptr.To[int32](3)
	})))
	js := waitJobSet(t, ns, "tidy")
	_, master := createPod(t, js, "master", 0)
	_, worker := createPod(t, js, "worker-0", 0)
	master(corev1.PodSucceeded)
	worker(corev1.PodRunning)
	finish(t, js)
	waitCondition(t, ns, "tidy", kubeflowv1.JobSucceeded, corev1.ConditionTrue, "")
	waitPods(t, ns, "tidy", 0)
	eventually(t, func() error {
		var svcs corev1.ServiceList
		if err := c.List(ctx(), &svcs, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(svcs.Items) > 0 {
			return fmt.Errorf("%d Services left", len(svcs.Items))
		}
		return nil
	})
	eventually(t, func() error {
		if err := c.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "tidy"}, &kubeflowv1.PyTorchJob{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("PyTorchJob still exists past its TTL (err=%v)", err)
		}
		return nil
	})
}

// cleanPodPolicy Running deletes only pods still running; None (the default)
// keeps every pod.
func TestCleanPodPolicyRunningAndNone(t *testing.T) {
	for _, tc := range []struct {
		policy *kubeflowv1.CleanPodPolicy
		left   int
	}{{ptr.To(kubeflowv1.CleanPodPolicyRunning), 1}, {nil, 2}} {
		name := "none"
		if tc.policy != nil {
			name = "running"
		}
		t.Run(name, func(t *testing.T) {
			ns := newNamespace(t)
			require.NoError(t, c.Create(ctx(), mnistJob(ns, name, func(j *kubeflowv1.PyTorchJob) { j.Spec.RunPolicy.CleanPodPolicy = tc.policy })))
			js := waitJobSet(t, ns, name)
			_, master := createPod(t, js, "master", 0)
			_, worker := createPod(t, js, "worker-0", 0)
			master(corev1.PodSucceeded)
			worker(corev1.PodRunning)
			finish(t, js)
			waitCondition(t, ns, name, kubeflowv1.JobSucceeded, corev1.ConditionTrue, "")
			waitPods(t, ns, name, tc.left)
			consistently(t, time.Second, func() error { return podCount(ns, name, tc.left) })
		})
	}
}

// Past activeDeadlineSeconds (from startTime) the job fails with v1's message
// and its JobSet and Services go.
func TestActiveDeadline(t *testing.T) {
	ns := newNamespace(t)
	require.NoError(t, c.Create(ctx(), mnistJob(ns, "slow", func(j *kubeflowv1.PyTorchJob) {
		j.Spec.RunPolicy.ActiveDeadlineSeconds = ptr.To[int64](2)
	})))
	js := waitJobSet(t, ns, "slow")
	job := waitCondition(t, ns, "slow", kubeflowv1.JobFailed, corev1.ConditionTrue, pytorchjob.ReasonFailed)
	require.Equal(t, "Job slow has failed because it was active longer than specified deadline", pytorchjob.FindCondition(&job.Status, kubeflowv1.JobFailed).Message)
	require.GreaterOrEqual(t, job.Status.CompletionTime.Sub(job.Status.StartTime.Time), 2*time.Second)
	eventually(t, func() error {
		if err := c.Get(ctx(), client.ObjectKeyFromObject(js), &jobsetv1alpha2.JobSet{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("JobSet still exists (err=%v)", err)
		}
		if err := c.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "slow-master-0"}, &corev1.Service{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Service still exists (err=%v)", err)
		}
		return nil
	})
}

// Time spent suspended does not count against activeDeadlineSeconds: v1
// restarts the clock (startTime) on resume.
func TestActiveDeadlineRestartsOnResume(t *testing.T) {
	ns := newNamespace(t)
	require.NoError(t, c.Create(ctx(), mnistJob(ns, "paused", func(j *kubeflowv1.PyTorchJob) {
		j.Spec.RunPolicy.ActiveDeadlineSeconds = ptr.To[int64](3)
	})))
	waitJobSet(t, ns, "paused")
	patchJob(t, ns, "paused", func(j *kubeflowv1.PyTorchJob) { j.Spec.RunPolicy.Suspend = ptr.To(true) })
	waitCondition(t, ns, "paused", kubeflowv1.JobSuspended, corev1.ConditionTrue, "")
	time.Sleep(3500 * time.Millisecond) // past the deadline, while suspended
	require.False(t, pytorchjob.IsTrue(&getJob(t, ns, "paused").Status, kubeflowv1.JobFailed), "a suspended job failed its deadline")

	patchJob(t, ns, "paused", func(j *kubeflowv1.PyTorchJob) { j.Spec.RunPolicy.Suspend = ptr.To(false) })
	waitCondition(t, ns, "paused", kubeflowv1.JobSuspended, corev1.ConditionFalse, pytorchjob.ReasonResumed)
	consistently(t, 1500*time.Millisecond, func() error {
		if pytorchjob.IsTrue(&getJob(t, ns, "paused").Status, kubeflowv1.JobFailed) {
			return fmt.Errorf("failed right after resuming")
		}
		return nil
	})
	waitCondition(t, ns, "paused", kubeflowv1.JobFailed, corev1.ConditionTrue, pytorchjob.ReasonFailed)
}

// finish marks the JobSet completed, as the JobSet controller does once the
// master's Job completed.
func finish(t *testing.T, js *jobsetv1alpha2.JobSet) {
	t.Helper()
	setJobSetStatus(t, js, func(s *jobsetv1alpha2.JobSetStatus) {
		s.ReplicatedJobsStatus = []jobsetv1alpha2.ReplicatedJobStatus{{Name: "master", Succeeded: 1}, {Name: "worker-0", Active: 1}}
		s.Conditions = []metav1.Condition{jobSetCondition(jobsetv1alpha2.JobSetCompleted, "AllJobsCompleted", "jobset completed successfully")}
	})
}

func podCount(ns, job string, want int) error {
	var pods corev1.PodList
	if err := c.List(ctx(), &pods, client.InNamespace(ns), client.MatchingLabels{kubeflowv1.JobNameLabel: job}); err != nil {
		return err
	}
	if len(pods.Items) != want {
		return fmt.Errorf("%d pods of %s, want %d", len(pods.Items), job, want)
	}
	return nil
}

func waitPods(t *testing.T, ns, job string, want int) {
	t.Helper()
	eventually(t, func() error { return podCount(ns, job, want) })
}
