package v1job

import (
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/childsync"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
	"github.com/trainyard/trainyard/pkg/observe"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
)

// Event reasons besides v1's condition reasons.
const (
	EventJobSetNotOwned = jobframework.EventJobSetNotOwned
	EventKindNotServed  = "ChildKindNotServed"
)

// pass is the state of one Status call.
type pass struct {
	def    *Def
	job    Job
	status *kubeflowv1.JobStatus
	now    metav1.Time
	out    jobframework.Outcome
}

func (p *pass) event(kind, reason, action, format string, args ...any) {
	p.out.Events = append(p.out.Events, jobframework.Event{Type: kind, Reason: reason, Action: action, Message: fmt.Sprintf(format, args...)})
}

// Status implements jobframework.Adapter: the job's v1 status from what was
// observed, purely. Input the user must fix fails the job (v1 rejected it
// at admission, so it never ran); API errors are retried.
func (a Adapter) Status(o client.Object, obs *observe.Observed, sync jobframework.Sync, now time.Time) jobframework.Outcome {
	job := o.(Job)
	updated := job.DeepCopyObject().(Job)
	p := &pass{def: a.Def, job: job, status: updated.JobStatus(), now: passTime(now)}
	p.out.Job = updated
	p.run(obs, sync)
	return p.out
}

func (p *pass) run(obs *observe.Observed, sync jobframework.Sync) {
	d, job, status := p.def, p.job, p.status
	if FindCondition(status, kubeflowv1.JobCreated) == nil {
		SetCondition(status, kubeflowv1.JobCreated, corev1.ConditionTrue, d.Reason(Created), d.msgCreated(job), p.now)
	}
	// A finished job never runs again: clean up as cleanPodPolicy says (the
	// framework deletes it past its TTL).
	if IsFinished(status) {
		if IsTrue(status, kubeflowv1.JobSucceeded) {
			succeedActive(status)
		}
		p.out.Delete = cleanUp(d.Defaulted(job), obs)
		return
	}
	if errs := d.Validate(nil, job); len(errs) > 0 {
		p.failValidation(errs.ToAggregate())
		return
	}
	dj := d.Defaulted(job)
	suspended := ptr.Deref(dj.JobRunPolicy().Suspend, false)
	if startRun(status, suspended, p.now) {
		msg := d.msgResumed(job)
		SetCondition(status, kubeflowv1.JobSuspended, corev1.ConditionFalse, d.Reason(Resumed), msg, p.now)
		p.event(corev1.EventTypeNormal, d.Reason(Resumed), "Resume", "%s", msg)
	}
	// Past activeDeadlineSeconds the job fails and everything it runs goes,
	// as in v1: the framework deletes the JobSet, the Services are the kind's.
	if sync.DeadlineExceeded {
		p.fail(d.Reason(Failed), msgDeadline(job))
		p.out.Delete = append(p.out.Delete, services(obs)...)
		return
	}
	switch err := sync.Err; {
	case framework.IsInvalid(err):
		p.failValidation(err)
		return
	case errors.Is(err, childsync.ErrNotOwned):
		p.event(corev1.EventTypeWarning, EventJobSetNotOwned, "Sync", "%v", err)
		return
	case errors.Is(err, childsync.ErrKindNotServed):
		p.event(corev1.EventTypeWarning, EventKindNotServed, "Sync", "%v", err)
		return
	case err != nil:
		return // transient: the framework retries
	}
	js := sync.After(obs).JobSet(job.GetName())
	p.updateStatus(dj, js, obs.PodsOf(js, ""), suspended)
}

// updateStatus sets suspension, replica counts, Running/Restarting and the
// terminal condition from the pods of the current JobSet and the JobSet.
func (p *pass) updateStatus(dj Job, js *jobsetv1alpha2.JobSet, pods []corev1.Pod, suspended bool) {
	d, job, status := p.def, p.job, p.status
	if suspended {
		// v1: a suspended job has no active pods.
		status.ReplicaStatuses = d.ReplicaStatuses(dj, nil)
		for t, rs := range job.JobStatus().ReplicaStatuses {
			if cur := status.ReplicaStatuses[t]; cur != nil && rs != nil {
				cur.Succeeded, cur.Failed = rs.Succeeded, rs.Failed
			}
		}
		msg := d.msgSuspended(job)
		if IsTrue(status, kubeflowv1.JobRunning) {
			SetCondition(status, kubeflowv1.JobRunning, corev1.ConditionFalse, d.Reason(Suspended), msg, p.now)
		}
		if !IsTrue(status, kubeflowv1.JobSuspended) {
			SetCondition(status, kubeflowv1.JobSuspended, corev1.ConditionTrue, d.Reason(Suspended), msg, p.now)
			p.event(corev1.EventTypeNormal, d.Reason(Suspended), "Suspend", "%s", msg)
		}
		return
	}
	status.ReplicaStatuses = d.ReplicaStatuses(dj, pods)
	if d.evicted(pods) {
		p.fail(d.Reason(Evicted), fmt.Sprintf("%s %s: the %s pod was evicted", d.Kind, job.GetName(), d.SuccessRole))
		return
	}
	d.updateRunning(p, dj)
	f, ok := observe.Finished(js)
	switch {
	case !ok:
		return
	case f.Failed:
		p.fail(d.Reason(Failed), d.failureMessage(dj, js, status, f.Message))
		return
	}
	msg := d.msgSucceeded(job)
	if SetCondition(status, kubeflowv1.JobSucceeded, corev1.ConditionTrue, d.Reason(Succeeded), msg, p.now) {
		p.event(corev1.EventTypeNormal, d.Reason(Succeeded), "Complete", "%s", msg)
	}
	if status.CompletionTime == nil {
		status.CompletionTime = p.now.DeepCopy()
	}
	succeedActive(status)
}

// evicted reports whether the success role's pod was evicted, for a kind
// that fails then (FailOnEviction: v1's MPIJob failed with MPIJobEvicted,
// whatever its restart policy).
func (d *Def) evicted(pods []corev1.Pod) bool {
	if !d.FailOnEviction {
		return false
	}
	for i := range pods {
		pod := &pods[i]
		if t, ok := d.ReplicaTypeOf(pod.Labels[kubeflowv1.ReplicaTypeLabel]); ok && t == d.SuccessRole &&
			pod.Status.Phase == corev1.PodFailed && pod.Status.Reason == "Evicted" {
			return true
		}
	}
	return false
}

// updateRunning sets Running once the success role's pod runs (v1: the
// Master, the Launcher), and Restarting when a role that restarts has
// failed pods and fewer running or succeeded pods than replicas; Restarting
// turning True is a Warning event, as v1 sent it.
func (d *Def) updateRunning(p *pass, dj Job) {
	st := p.status
	for _, t := range d.RolesOf(dj) {
		rs, spec := st.ReplicaStatuses[t], dj.ReplicaSpecs()[t]
		if rs == nil || spec == nil {
			continue
		}
		if t == d.SuccessRole && rs.Active > 0 {
			SetCondition(st, kubeflowv1.JobRunning, corev1.ConditionTrue, d.Reason(Running), d.msgRunning(p.job), p.now)
		}
		if rs.Failed > 0 && ptr.Deref(spec.Replicas, 1) > rs.Succeeded+rs.Active && spec.RestartPolicy != kubeflowv1.RestartPolicyNever {
			msg := d.msgRestarting(p.job, rs.Failed, t)
			if SetCondition(st, kubeflowv1.JobRestarting, corev1.ConditionTrue, d.Reason(Restarting), msg, p.now) {
				p.event(corev1.EventTypeWarning, d.Reason(Restarting), "Restart", "%s", msg)
			}
		}
	}
}

// failureMessage attributes a failed JobSet to the first role (in the
// kind's order) with a failed Job or pod: a role whose pods restart in place
// fails only by exhausting backoffLimit; one whose pods do not fails because
// its pods failed, and v1 said how many.
func (d *Def) failureMessage(dj Job, js *jobsetv1alpha2.JobSet, st *kubeflowv1.JobStatus, jobSetMsg string) string {
	failed := map[kubeflowv1.ReplicaType]bool{}
	for _, name := range observe.FailedJobs(js) {
		for _, t := range d.Roles {
			if len(name) > len(LowerType(t)) && name[:len(LowerType(t))+1] == LowerType(t)+"-" {
				failed[t] = true
			}
		}
	}
	for _, t := range d.RolesOf(dj) {
		rs := st.ReplicaStatuses[t]
		if !failed[t] && (rs == nil || rs.Failed == 0) {
			continue
		}
		switch dj.ReplicaSpecs()[t].RestartPolicy {
		case kubeflowv1.RestartPolicyNever, kubeflowv1.RestartPolicyExitCode:
			n := int32(1)
			if rs != nil && rs.Failed > 0 {
				n = rs.Failed
			}
			return d.msgReplicasFailed(dj, n, t)
		default:
			return msgBackoff(dj)
		}
	}
	return fmt.Sprintf("%s %s is failed: %s", d.Kind, dj.GetName(), jobSetMsg)
}

// fail sets Failed with its completion time, and says so in an event.
func (p *pass) fail(reason, msg string) {
	if SetCondition(p.status, kubeflowv1.JobFailed, corev1.ConditionTrue, reason, msg, p.now) {
		p.event(corev1.EventTypeWarning, reason, "Fail", "%s", msg)
	}
	if p.status.CompletionTime == nil {
		p.status.CompletionTime = p.now.DeepCopy()
	}
}

// failValidation fails a job that can never run (v1 would have rejected it
// at admission); failing it also tells Kueue the workload is finished.
func (p *pass) failValidation(err error) {
	p.fail(p.def.Reason(FailedValidation), p.def.msgFailedValidation(p.job, err))
}

// succeedActive moves active counts to succeeded, as v1 did once a job succeeded.
func succeedActive(status *kubeflowv1.JobStatus) {
	for _, rs := range status.ReplicaStatuses {
		if rs != nil {
			rs.Succeeded += rs.Active
			rs.Active = 0
		}
	}
}

// ReplicaStatuses counts the pods of each role as v1 did: a running pod is
// active (failed when it is being deleted), succeeded and failed pods count
// as such, pending ones not at all. Every role has an entry with its selector.
func (d *Def) ReplicaStatuses(job Job, pods []corev1.Pod) map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaStatus {
	out := map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaStatus{}
	for _, t := range d.RolesOf(job) {
		out[t] = &kubeflowv1.ReplicaStatus{Selector: d.RoleSelector(job.GetName(), t)}
	}
	for i := range pods {
		p := &pods[i]
		t, ok := d.ReplicaTypeOf(p.Labels[kubeflowv1.ReplicaTypeLabel])
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

// cleanUp applies cleanPodPolicy to a finished job: the pods and Services to
// delete. None keeps every pod; Running deletes the pods still running or
// pending; All every pod. Running and All also delete the Services.
func cleanUp(job Job, obs *observe.Observed) []client.Object {
	policy := ptr.Deref(job.JobRunPolicy().CleanPodPolicy, kubeflowv1.CleanPodPolicyNone)
	if policy == kubeflowv1.CleanPodPolicyNone {
		return nil
	}
	var out []client.Object
	for i := range obs.Pods {
		pod := &obs.Pods[i]
		if pod.DeletionTimestamp != nil {
			continue
		}
		if policy == kubeflowv1.CleanPodPolicyRunning && pod.Status.Phase != corev1.PodRunning && pod.Status.Phase != corev1.PodPending {
			continue
		}
		out = append(out, pod.DeepCopy())
	}
	return append(out, services(obs)...)
}

// services are the job's Services, as observed.
func services(obs *observe.Observed) []client.Object {
	var out []client.Object
	for _, o := range obs.Children {
		if svc, ok := o.(*corev1.Service); ok && svc.DeletionTimestamp == nil {
			out = append(out, svc)
		}
	}
	return out
}
