package trainjob

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/observe"
	trruntime "github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
)

// summarize sets the one-word phase with its reason and message, the node
// counts, and the start and completion times, from the conditions, the JobSet
// and the trainer pods. The order of the cases is the order of precedence.
// gang, when non-nil, explains pods that wait for their gang (a PodGroup the
// scheduler has not placed yet); it wins over what the pods say.
func summarize(job *trainer.TrainJob, js *jobsetv1alpha2.JobSet, obs *observe.Observed,
	status *trainer.TrainJobStatus, now time.Time, gang *framework.Waiting) {
	var numNodes, ready, succeeded int32
	trainerJob := ""
	if js != nil {
		if rj := trruntime.TrainerJob(&js.Spec); rj != nil {
			trainerJob, numNodes = rj.Name, ptr.Deref(rj.Template.Spec.Parallelism, 1)
		}
	}
	podReason, podMessage := "WaitingForPods", ""
	active := js != nil && trainerJob != "" && !ptr.Deref(js.Spec.Suspend, false) && !finished(status)
	if active {
		pods := livePods(obs.PodsOf(js, trainerJob))
		ready, succeeded, podReason, podMessage = nodesState(pods, numNodes)
		if observe.AllReady(js, trainerJob) && ready+succeeded < numNodes {
			ready = numNodes - succeeded // JobSet saw every pod ready or done; the pod cache may lag
		}
	}

	// A job that a queue holds back (Kueue suspended the TrainJob, or keeps its
	// JobSet suspended) is Pending for the queue's reason, not Suspended.
	var queued bool
	var queueReason, queueMessage string
	if !finished(status) && (isSuspended(job) || js == nil || ptr.Deref(js.Spec.Suspend, false)) {
		queueReason, queueMessage, queued = queueState(job, js, obs)
	}

	phase, reason, message := trainer.TrainJobPending, "", ""
	created := meta.FindStatusCondition(status.Conditions, trainer.TrainJobCreated)
	switch {
	case condTrue(status, trainer.TrainJobFailed):
		c := meta.FindStatusCondition(status.Conditions, trainer.TrainJobFailed)
		phase, reason, message = trainer.TrainJobFailedPhase, c.Reason, c.Message
	case condTrue(status, trainer.TrainJobComplete):
		c := meta.FindStatusCondition(status.Conditions, trainer.TrainJobComplete)
		phase, reason, message = trainer.TrainJobCompletePhase, c.Reason, c.Message
	case queued:
		reason, message = queueReason, queueMessage
	case isSuspended(job):
		phase, reason, message = trainer.TrainJobSuspendedPhase, trainer.TrainJobSuspendedReason, "TrainJob is suspended"
	case created != nil && created.Status == metav1.ConditionFalse:
		reason, message = created.Reason, created.Message
	case js == nil || ptr.Deref(js.Spec.Suspend, false):
		reason, message = "WaitingForJobSet", "the JobSet is being created or resumed"
	case numNodes > 0 && ready+succeeded >= numNodes:
		// Once every node has started, a job stays Running while its nodes
		// finish one by one, until the JobSet says it is complete.
		phase, reason, message = trainer.TrainJobRunning, "AllNodesStarted", fmt.Sprintf("%d/%d nodes running", ready, numNodes)
		if succeeded > 0 {
			message += fmt.Sprintf(", %d finished", succeeded)
		}
	default:
		reason, message = podReason, podMessage
		if gang != nil {
			reason, message = gang.Reason, gang.Message
		}
	}
	status.Phase, status.Reason, status.Message = phase, reason, truncate(message)
	status.NumNodes, status.ReadyNodes = nil, nil
	if js != nil {
		status.NumNodes, status.ReadyNodes = ptr.To(numNodes), ptr.To(ready)
	}

	switch {
	case phase == trainer.TrainJobRunning && status.StartTime == nil:
		status.StartTime = &metav1.Time{Time: now}
	case phase == trainer.TrainJobSuspendedPhase || queued:
		status.StartTime = nil // counts again from the next run, like a Job's
	}
	if finished(status) && status.CompletionTime == nil {
		status.CompletionTime = &metav1.Time{Time: now}
		for _, t := range []string{trainer.TrainJobComplete, trainer.TrainJobFailed} {
			if c := meta.FindStatusCondition(status.Conditions, t); c != nil && c.Status == metav1.ConditionTrue && !c.LastTransitionTime.IsZero() {
				status.CompletionTime = c.LastTransitionTime.DeepCopy()
			}
		}
	}
}

func condTrue(status *trainer.TrainJobStatus, t string) bool {
	return meta.IsStatusConditionTrue(status.Conditions, t)
}

// pendingSince is when the job started waiting for its nodes: its creation, or
// its last resume.
func pendingSince(job *trainer.TrainJob, status *trainer.TrainJobStatus) time.Time {
	start := job.CreationTimestamp.Time
	if c := meta.FindStatusCondition(status.Conditions, trainer.TrainJobSuspended); c != nil &&
		c.Status == metav1.ConditionFalse && c.LastTransitionTime.After(start) {
		start = c.LastTransitionTime.Time
	}
	return start
}
