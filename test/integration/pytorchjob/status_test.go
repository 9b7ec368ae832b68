package pytorchjob

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/controller/pytorchjob"
)

// counts is a role's replica status without its selector.
type counts struct{ Active, Succeeded, Failed int32 }

func waitCounts(t *testing.T, ns, name string, want map[kubeflowv1.ReplicaType]counts) *kubeflowv1.PyTorchJob {
	t.Helper()
	var job *kubeflowv1.PyTorchJob
	eventually(t, func() error {
		job = getJob(t, ns, name)
		got := map[kubeflowv1.ReplicaType]counts{}
		for k, rs := range job.Status.ReplicaStatuses {
			got[k] = counts{rs.Active, rs.Succeeded, rs.Failed}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			return fmt.Errorf("replica statuses (-want +got):\n%s", diff)
		}
		return nil
	})
	return job
}

// Created → Running (the master runs) → Restarting (a worker failed with a
// retryable exit code) → Running (its replacement runs) → Succeeded (the
// master's Job completed, so the JobSet did), with v1's reasons, messages,
// counts and times.
func TestStatusTransitions(t *testing.T) {
	ns := newNamespace(t)
	require.NoError(t, c.Create(ctx(), mnistJob(ns, "life", func(j *kubeflowv1.PyTorchJob) {
		j.Spec.PyTorchReplicaSpecs["Worker"].RestartPolicy = kubeflowv1.RestartPolicyExitCode
	})))
	js := waitJobSet(t, ns, "life")
	_, master := createPod(t, js, "master", 0)
	_, worker := createPod(t, js, "worker-0", 0)

	master(corev1.PodRunning)
	job := waitCondition(t, ns, "life", kubeflowv1.JobRunning, corev1.ConditionTrue, pytorchjob.ReasonRunning)
	require.Equal(t, "PyTorchJob life is running.", pytorchjob.FindCondition(&job.Status, kubeflowv1.JobRunning).Message)
	require.Equal(t, "Running", state(job))
	waitCounts(t, ns, "life", map[kubeflowv1.ReplicaType]counts{"Master": {Active: 1}, "Worker": {}})

	worker(corev1.PodFailed)
	job = waitCondition(t, ns, "life", kubeflowv1.JobRestarting, corev1.ConditionTrue, pytorchjob.ReasonRestarting)
	require.Equal(t, "PyTorchJob life is restarting because 1 Worker replica(s) failed.", pytorchjob.FindCondition(&job.Status, kubeflowv1.JobRestarting).Message)
	require.Nil(t, pytorchjob.FindCondition(&job.Status, kubeflowv1.JobRunning), "Restarting replaces Running")
	require.Equal(t, "Restarting", state(job))

	// The Job controller replaces the failed pod.
	_, replacement := createPodNamed(t, js, "worker-0", 0, "life-worker-0-0-0-fghij")
	replacement(corev1.PodRunning)
	job = waitCondition(t, ns, "life", kubeflowv1.JobRunning, corev1.ConditionTrue, pytorchjob.ReasonRunning)
	require.Nil(t, pytorchjob.FindCondition(&job.Status, kubeflowv1.JobRestarting))
	waitCounts(t, ns, "life", map[kubeflowv1.ReplicaType]counts{"Master": {Active: 1}, "Worker": {Active: 1, Failed: 1}})

	master(corev1.PodSucceeded)
	setJobSetStatus(t, js, func(s *jobsetv1alpha2.JobSetStatus) {
		s.ReplicatedJobsStatus = []jobsetv1alpha2.ReplicatedJobStatus{{Name: "master", Succeeded: 1}, {Name: "worker-0", Active: 1}}
		s.Conditions = []metav1.Condition{jobSetCondition(jobsetv1alpha2.JobSetCompleted, "AllJobsCompleted", "jobset completed successfully")}
	})
	job = waitCondition(t, ns, "life", kubeflowv1.JobSucceeded, corev1.ConditionTrue, pytorchjob.ReasonSucceeded)
	require.Equal(t, "PyTorchJob life is successfully completed.", pytorchjob.FindCondition(&job.Status, kubeflowv1.JobSucceeded).Message)
	require.Equal(t, corev1.ConditionFalse, pytorchjob.FindCondition(&job.Status, kubeflowv1.JobRunning).Status)
	require.Equal(t, "Succeeded", state(job))
	require.NotNil(t, job.Status.CompletionTime)
	// v1 counts replicas still active at success as succeeded.
	waitCounts(t, ns, "life", map[kubeflowv1.ReplicaType]counts{"Master": {Succeeded: 1}, "Worker": {Succeeded: 1, Failed: 1}})
}

// A worker that must not restart (Never) fails its Job, the JobSet, and so the
// PyTorchJob, with v1's message; a failed job is never restarted.
func TestFailedStatus(t *testing.T) {
	ns := newNamespace(t)
	require.NoError(t, c.Create(ctx(), mnistJob(ns, "doomed", func(j *kubeflowv1.PyTorchJob) {
		j.Spec.PyTorchReplicaSpecs["Worker"].RestartPolicy = kubeflowv1.RestartPolicyNever
	})))
	js := waitJobSet(t, ns, "doomed")
	require.Equal(t, int32(0), *replicatedJob(t, js, "worker-0").Template.Spec.BackoffLimit)
	_, master := createPod(t, js, "master", 0)
	_, worker := createPod(t, js, "worker-0", 0)
	master(corev1.PodRunning)
	worker(corev1.PodFailed)
	setJobSetStatus(t, js, func(s *jobsetv1alpha2.JobSetStatus) {
		s.ReplicatedJobsStatus = []jobsetv1alpha2.ReplicatedJobStatus{{Name: "master", Active: 1}, {Name: "worker-0", Failed: 1}}
		s.Conditions = []metav1.Condition{jobSetCondition(jobsetv1alpha2.JobSetFailed, "FailedJobs", "jobset failed due to one or more job failures (first failed job: doomed-worker-0-0)")}
	})
	job := waitCondition(t, ns, "doomed", kubeflowv1.JobFailed, corev1.ConditionTrue, pytorchjob.ReasonFailed)
	require.Equal(t, "PyTorchJob doomed is failed because 1 Worker replica(s) failed.", pytorchjob.FindCondition(&job.Status, kubeflowv1.JobFailed).Message)
	require.Equal(t, "Failed", state(job))
	require.NotNil(t, job.Status.CompletionTime)

	// Deleting the JobSet of a failed job does not bring it back.
	require.NoError(t, c.Delete(ctx(), js))
	patchJob(t, ns, "doomed", func(j *kubeflowv1.PyTorchJob) { j.Annotations = map[string]string{"poke": "1"} })
	consistently(t, 2*time.Second, func() error {
		var cur jobsetv1alpha2.JobSet
		if err := c.Get(ctx(), client.ObjectKeyFromObject(js), &cur); err == nil && cur.UID != js.UID {
			return fmt.Errorf("JobSet recreated for a failed job")
		}
		return nil
	})
}
