package v1job

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
)

// Reason suffixes: a condition's reason is <Kind><suffix>, as v1 wrote them
// (MPIJobRunning, XGBoostJobSucceeded).
const (
	Created          = "Created"
	Running          = "Running"
	Restarting       = "Restarting"
	Succeeded        = "Succeeded"
	Failed           = "Failed"
	Suspended        = "Suspended"
	Resumed          = "Resumed"
	FailedValidation = "FailedValidation"
	// Evicted: the MPIJob launcher's pod was evicted (v1's MPIJobEvicted).
	Evicted = "Evicted"
)

// Reason is the kind's reason for a suffix.
func (d *Def) Reason(suffix string) string { return d.Kind + suffix }

// FindCondition returns the condition of this type, or nil.
func FindCondition(st *kubeflowv1.JobStatus, t kubeflowv1.JobConditionType) *kubeflowv1.JobCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

// IsTrue reports whether the condition of this type is True.
func IsTrue(st *kubeflowv1.JobStatus, t kubeflowv1.JobConditionType) bool {
	c := FindCondition(st, t)
	return c != nil && c.Status == corev1.ConditionTrue
}

// IsFinished reports whether the job succeeded or failed.
func IsFinished(st *kubeflowv1.JobStatus) bool {
	return IsTrue(st, kubeflowv1.JobSucceeded) || IsTrue(st, kubeflowv1.JobFailed)
}

// SetCondition sets a condition with v1's rules, and reports whether it
// changed anything: once Failed is True nothing changes; the same status
// and reason is no change; Running and Restarting replace each other;
// Succeeded or Failed turn Running False; the new condition goes last (the
// State column shows the last type), keeping its lastTransitionTime when
// only its reason changed.
func SetCondition(st *kubeflowv1.JobStatus, t kubeflowv1.JobConditionType, status corev1.ConditionStatus, reason, msg string, now metav1.Time) bool {
	if IsTrue(st, kubeflowv1.JobFailed) {
		return false
	}
	cond := kubeflowv1.JobCondition{Type: t, Status: status, Reason: reason, Message: msg, LastUpdateTime: now, LastTransitionTime: now}
	if cur := FindCondition(st, t); cur != nil {
		if cur.Status == status && cur.Reason == reason {
			return false
		}
		if cur.Status == status {
			cond.LastTransitionTime = cur.LastTransitionTime
		}
	}
	out := make([]kubeflowv1.JobCondition, 0, len(st.Conditions)+1)
	for _, c := range st.Conditions {
		switch {
		case c.Type == t,
			t == kubeflowv1.JobRestarting && c.Type == kubeflowv1.JobRunning,
			t == kubeflowv1.JobRunning && c.Type == kubeflowv1.JobRestarting:
			continue
		case (t == kubeflowv1.JobFailed || t == kubeflowv1.JobSucceeded) && c.Type == kubeflowv1.JobRunning && c.Status != corev1.ConditionFalse:
			c.Status, c.LastUpdateTime, c.LastTransitionTime = corev1.ConditionFalse, now, now
		}
		out = append(out, c)
	}
	st.Conditions = append(out, cond)
	return true
}

// Messages, as v1's common controller wrote them.
func (d *Def) msgCreated(job Job) string {
	return fmt.Sprintf("%s %s is created.", d.Kind, job.GetName())
}
func (d *Def) msgRunning(job Job) string {
	return fmt.Sprintf("%s %s is running.", d.Kind, job.GetName())
}
func (d *Def) msgSucceeded(job Job) string {
	return fmt.Sprintf("%s %s is successfully completed.", d.Kind, job.GetName())
}
func (d *Def) msgSuspended(job Job) string {
	return fmt.Sprintf("%s %s is suspended.", d.Kind, job.GetName())
}
func (d *Def) msgResumed(job Job) string {
	return fmt.Sprintf("%s %s is resumed.", d.Kind, job.GetName())
}
func (d *Def) msgReplicasFailed(job Job, n int32, t kubeflowv1.ReplicaType) string {
	return fmt.Sprintf("%s %s is failed because %d %s replica(s) failed.", d.Kind, job.GetName(), n, t)
}
func (d *Def) msgRestarting(job Job, n int32, t kubeflowv1.ReplicaType) string {
	return fmt.Sprintf("%s %s is restarting because %d %s replica(s) failed.", d.Kind, job.GetName(), n, t)
}
func msgDeadline(job Job) string {
	return fmt.Sprintf("Job %s has failed because it was active longer than specified deadline", job.GetName())
}
func msgBackoff(job Job) string {
	return fmt.Sprintf("Job %s has failed because it has reached the specified backoff limit", job.GetName())
}
func (d *Def) msgFailedValidation(job Job, err error) string {
	return fmt.Sprintf("%s %s failed validation because %v", d.Kind, job.GetName(), err)
}
