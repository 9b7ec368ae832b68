package trainjob

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// finished reports whether a terminal condition is set. A finished TrainJob is
// never given a new JobSet.
func finished(status *trainer.TrainJobStatus) bool {
	return meta.IsStatusConditionTrue(status.Conditions, trainer.TrainJobComplete) ||
		meta.IsStatusConditionTrue(status.Conditions, trainer.TrainJobFailed)
}

// setCondition sets a condition, stamping a transition with now (the pass's
// clock, not the wall clock), and reports whether anything but the
// observedGeneration changed. The message is compared as it is stored
// (truncated), so a long message is not a change on every pass.
func setCondition(status *trainer.TrainJobStatus, gen int64, now time.Time, t string, s metav1.ConditionStatus, reason, msg string) bool {
	msg = truncate(msg)
	old := meta.FindStatusCondition(status.Conditions, t)
	changed := old == nil || old.Status != s || old.Reason != reason || old.Message != msg
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{
		Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen,
		LastTransitionTime: metav1.NewTime(now.Truncate(time.Second)),
	})
	return changed
}

// setSuspended keeps the Suspended condition in line with spec.suspend: True
// while suspended, False (Resumed) once a suspended job resumes, absent for a
// job that was never suspended.
func setSuspended(job *trainer.TrainJob, status *trainer.TrainJobStatus, at time.Time) (changed bool, now bool) {
	if isSuspended(job) {
		return setCondition(status, job.Generation, at, trainer.TrainJobSuspended, metav1.ConditionTrue,
			trainer.TrainJobSuspendedReason, "TrainJob is suspended"), true
	}
	if c := meta.FindStatusCondition(status.Conditions, trainer.TrainJobSuspended); c != nil && c.Status == metav1.ConditionTrue {
		return setCondition(status, job.Generation, at, trainer.TrainJobSuspended, metav1.ConditionFalse,
			trainer.TrainJobResumedReason, "TrainJob is resumed"), false
	}
	return false, false
}

// deadline returns when an unsuspended job with activeDeadlineSeconds must be
// done: its deadline counts from creation, or from its last resume.
func deadline(job *trainer.TrainJob, status *trainer.TrainJobStatus) (time.Time, bool) {
	if job.Spec.ActiveDeadlineSeconds == nil || isSuspended(job) {
		return time.Time{}, false
	}
	// The deadline counts from the start of the current run, as the time
	// pending does.
	return pendingSince(job, status).Add(time.Duration(*job.Spec.ActiveDeadlineSeconds) * time.Second), true
}

// isSuspended reports whether a TrainJob asks to be suspended.
func isSuspended(job *trainer.TrainJob) bool { return ptr.Deref(job.Spec.Suspend, false) }

// truncate keeps condition messages within the API's 32 KiB limit.
func truncate(s string) string {
	const limit = 4096
	if len(s) <= limit {
		return s
	}
	return s[:limit-3] + "..."
}

// FindCondition returns the condition of type t of a TrainJob, or nil.
func FindCondition(job *trainer.TrainJob, t string) *metav1.Condition {
	return meta.FindStatusCondition(job.Status.Conditions, t)
}
