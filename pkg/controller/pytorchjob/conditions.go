package pytorchjob

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/observe"
)

// Reasons are <Kind><Reason>, as v1 wrote them.
const (
	ReasonCreated          = "PyTorchJobCreated"
	ReasonRunning          = "PyTorchJobRunning"
	ReasonRestarting       = "PyTorchJobRestarting"
	ReasonSucceeded        = "PyTorchJobSucceeded"
	ReasonFailed           = "PyTorchJobFailed"
	ReasonSuspended        = "PyTorchJobSuspended"
	ReasonResumed          = "PyTorchJobResumed"
	ReasonFailedValidation = "PyTorchJobFailedValidation"
)

// Condition messages, as v1 wrote them.
func msgCreated(job *kubeflowv1.PyTorchJob) string {
	return fmt.Sprintf("PyTorchJob %s is created.", job.Name)
}

// MsgSuspended is the Suspended condition's message while suspended.
func MsgSuspended(job *kubeflowv1.PyTorchJob) string {
	return fmt.Sprintf("PyTorchJob %s is suspended.", job.Name)
}

// MsgResumed is the Suspended condition's message once resumed.
func MsgResumed(job *kubeflowv1.PyTorchJob) string {
	return fmt.Sprintf("PyTorchJob %s is resumed.", job.Name)
}

// MsgDeadline is the Failed message of a job past activeDeadlineSeconds.
func MsgDeadline(job *kubeflowv1.PyTorchJob) string {
	return fmt.Sprintf("Job %s has failed because it was active longer than specified deadline", job.Name)
}

// MsgBackoff is the Failed message of a job past backoffLimit.
func MsgBackoff(job *kubeflowv1.PyTorchJob) string {
	return fmt.Sprintf("Job %s has failed because it has reached the specified backoff limit", job.Name)
}

// MsgFailedValidation is the Failed message of a job Trainyard cannot run.
func MsgFailedValidation(job *kubeflowv1.PyTorchJob, err error) string {
	return fmt.Sprintf("PyTorchJob %s failed validation because %v", job.Name, err)
}

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
// changed anything:
//   - once Failed is True, nothing changes any more;
//   - the same status and reason is no change (the message stays);
//   - Running and Restarting replace each other;
//   - Succeeded or Failed turn a Running condition False;
//   - the new condition goes last (the State column shows the last type), and
//     keeps its lastTransitionTime when only its reason changed.
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

// SetCreated adds Created the first time the job is seen.
func SetCreated(job *kubeflowv1.PyTorchJob, st *kubeflowv1.JobStatus, now metav1.Time) bool {
	if FindCondition(st, kubeflowv1.JobCreated) != nil {
		return false
	}
	return SetCondition(st, kubeflowv1.JobCreated, corev1.ConditionTrue, ReasonCreated, msgCreated(job), now)
}

// RoleOf returns the role of a pod from its replica-type label.
func RoleOf(pod *corev1.Pod) (kubeflowv1.ReplicaType, bool) {
	return ReplicaTypeOf(pod.Labels[kubeflowv1.ReplicaTypeLabel])
}

// ReplicaStatuses counts the pods of each role as v1 did: a running pod is
// active (failed when it is being deleted: its node may be gone), succeeded
// and failed pods count as such, pending ones not at all. Every role of the
// job has an entry with its selector.
func ReplicaStatuses(job *kubeflowv1.PyTorchJob, pods []corev1.Pod) map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaStatus {
	out := map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaStatus{}
	for _, t := range Roles(job) {
		out[t] = &kubeflowv1.ReplicaStatus{Selector: RoleSelector(job.Name, t)}
	}
	for i := range pods {
		p := &pods[i]
		t, ok := RoleOf(p)
		if !ok || out[t] == nil {
			continue
		}
		switch p.Status.Phase {
		case corev1.PodRunning:
			if p.DeletionTimestamp != nil {
				out[t].Failed++
			} else {
				out[t].Active++
			}
		case corev1.PodSucceeded:
			out[t].Succeeded++
		case corev1.PodFailed:
			out[t].Failed++
		}
	}
	return out
}

// Transition is a condition change worth an event.
type Transition struct {
	Type    kubeflowv1.JobConditionType
	Reason  string
	Message string
}

// UpdateRunning sets Running and Restarting from the replica counts, with v1's
// rules, Master first: Running once the Master runs (without a Master: once a
// worker runs); Restarting when a role has failed pods and fewer running or
// succeeded pods than replicas, and restarts them. Roles that never restart
// (Never) fail the job through the JobSet instead. It returns the Restarting
// transitions, which v1 reported as Warning events.
func UpdateRunning(job *kubeflowv1.PyTorchJob, st *kubeflowv1.JobStatus, now metav1.Time) []Transition {
	var out []Transition
	for _, t := range Roles(job) {
		rs, spec := st.ReplicaStatuses[t], job.Spec.PyTorchReplicaSpecs[t]
		if rs == nil || spec == nil {
			continue
		}
		replicas := *spec.Replicas
		if (t == kubeflowv1.PyTorchJobReplicaTypeMaster || !HasMaster(job)) && rs.Active > 0 {
			msg := fmt.Sprintf("PyTorchJob %s is running.", job.Name)
			if !HasMaster(job) {
				msg = fmt.Sprintf("PyTorchJob %s/%s is running.", job.Namespace, job.Name)
			}
			SetCondition(st, kubeflowv1.JobRunning, corev1.ConditionTrue, ReasonRunning, msg, now)
		}
		if rs.Failed > 0 && replicas > rs.Succeeded+rs.Active && spec.RestartPolicy != kubeflowv1.RestartPolicyNever {
			msg := fmt.Sprintf("PyTorchJob %s is restarting because %d %s replica(s) failed.", job.Name, rs.Failed, t)
			if SetCondition(st, kubeflowv1.JobRestarting, corev1.ConditionTrue, ReasonRestarting, msg, now) {
				out = append(out, Transition{kubeflowv1.JobRestarting, ReasonRestarting, msg})
			}
		}
	}
	return out
}

// RoleOfReplicatedJob returns the role a replicated job of the JobSet runs.
func RoleOfReplicatedJob(name string) (kubeflowv1.ReplicaType, bool) {
	switch {
	case name == MasterJob:
		return kubeflowv1.PyTorchJobReplicaTypeMaster, true
	case name == ElasticWorkerJob || strings.HasPrefix(name, "worker-"):
		return kubeflowv1.PyTorchJobReplicaTypeWorker, true
	}
	return "", false
}

// Terminal reads a finished JobSet: the v1 condition (Succeeded or Failed) and
// its message, or ok=false while the JobSet runs.
//
// A failure is attributed to the first role (Master first) with a failed Job.
// A role whose pods restart in place (OnFailure, Always) fails only by
// exhausting backoffLimit; one whose pods do not (Never, ExitCode) fails
// because its pods failed, and v1 said how many.
func Terminal(job *kubeflowv1.PyTorchJob, js *jobsetv1alpha2.JobSet, st *kubeflowv1.JobStatus) (t kubeflowv1.JobConditionType, reason, msg string, ok bool) {
	f, ok := observe.Finished(js)
	switch {
	case !ok:
		return "", "", "", false
	case f.Failed:
		return kubeflowv1.JobFailed, ReasonFailed, failureMessage(job, js, st, f.Message), true
	case HasMaster(job):
		return kubeflowv1.JobSucceeded, ReasonSucceeded, fmt.Sprintf("PyTorchJob %s is successfully completed.", job.Name), true
	}
	return kubeflowv1.JobSucceeded, ReasonSucceeded, fmt.Sprintf("PyTorchJob %s/%s successfully completed.", job.Namespace, job.Name), true
}

func failureMessage(job *kubeflowv1.PyTorchJob, js *jobsetv1alpha2.JobSet, st *kubeflowv1.JobStatus, jobSetMsg string) string {
	failedRoles := map[kubeflowv1.ReplicaType]bool{}
	for _, name := range observe.FailedJobs(js) {
		if t, ok := RoleOfReplicatedJob(name); ok {
			failedRoles[t] = true
		}
	}
	for _, t := range Roles(job) {
		rs := st.ReplicaStatuses[t]
		if !failedRoles[t] && (rs == nil || rs.Failed == 0) {
			continue
		}
		switch job.Spec.PyTorchReplicaSpecs[t].RestartPolicy {
		case kubeflowv1.RestartPolicyNever, kubeflowv1.RestartPolicyExitCode:
			n := int32(1)
			if rs != nil && rs.Failed > 0 {
				n = rs.Failed
			}
			return fmt.Sprintf("PyTorchJob %s is failed because %d %s replica(s) failed.", job.Name, n, t)
		default:
			return MsgBackoff(job)
		}
	}
	return fmt.Sprintf("PyTorchJob %s is failed: %s", job.Name, jobSetMsg)
}
