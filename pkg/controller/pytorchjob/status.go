package pytorchjob

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

// pass is the state of one Status call.
type pass struct {
	job    *kubeflowv1.PyTorchJob
	status *kubeflowv1.JobStatus
	now    metav1.Time
	out    jobframework.Outcome
}

func (p *pass) event(kind, reason, action, format string, args ...any) {
	p.out.Events = append(p.out.Events, jobframework.Event{Type: kind, Reason: reason, Action: action, Message: fmt.Sprintf(format, args...)})
}

// Status implements jobframework.Adapter. Input the user must fix fails the
// job (v1 rejected it at admission, so it never ran); API errors are retried.
func (a Adapter) Status(o client.Object, obs *observe.Observed, sync jobframework.Sync, now time.Time) jobframework.Outcome {
	job := o.(*kubeflowv1.PyTorchJob)
	updated := job.DeepCopy()
	p := &pass{job: job, status: &updated.Status, now: passTime(now)}
	p.out.Job = updated
	p.run(obs, sync)
	return p.out
}

// RecordSync implements jobframework.Recorder: nothing of syncing is counted.
func (Adapter) RecordSync(client.Object, jobframework.Sync, time.Time) {}

// RecordStatus implements jobframework.Recorder: the conditions that turned True.
func (a Adapter) RecordStatus(old, updated client.Object, _ time.Time) {
	if u, ok := updated.(*kubeflowv1.PyTorchJob); ok && u != nil {
		recordTransitions(a.Metrics, &old.(*kubeflowv1.PyTorchJob).Status, &u.Status)
	}
}

// SyncEvents implements jobframework.SyncEventer: v1 warned on every pod it
// created; once per JobSet is enough.
func (Adapter) SyncEvents(o client.Object, sync jobframework.Sync) []jobframework.Event {
	if sync.Result.Action(observe.JobSetKind, o.GetName()) != childsync.Created {
		return nil
	}
	job := o.(*kubeflowv1.PyTorchJob)
	warnings, _ := Validate(nil, job)
	d := Defaulted(job)
	var evs []jobframework.Event
	for _, t := range Roles(d) {
		if d.Spec.PyTorchReplicaSpecs[t].Template.Spec.RestartPolicy != "" {
			evs = append(evs, jobframework.Event{Type: corev1.EventTypeWarning, Reason: EventTemplateRestartPol, Action: "Create", Message: fmt.Sprintf("%s: %s", t, msgTemplateRestartPolicy)})
		}
	}
	for _, w := range warnings {
		evs = append(evs, jobframework.Event{Type: corev1.EventTypeWarning, Reason: EventDeprecatedField, Action: "Create", Message: w})
	}
	return evs
}

func (p *pass) run(obs *observe.Observed, sync jobframework.Sync) {
	job, status := p.job, p.status
	SetCreated(job, status, p.now)

	// 1. A finished job never runs again: clean up as cleanPodPolicy says
	// (the framework deletes it past its TTL).
	if IsFinished(status) {
		p.finished(obs)
		return
	}

	// 2. Validate what was written, then default in memory, as v1 did.
	_, errs := Validate(nil, job)
	if len(errs) > 0 {
		p.failValidation(errs.ToAggregate())
		return
	}
	d := Defaulted(job)
	suspended := ptr.Deref(d.Spec.RunPolicy.Suspend, false)

	// 3. A resumed job counts its deadline from now; one that never ran from
	// its first unsuspended pass (v1's startTime).
	if startRun(status, suspended, p.now) {
		msg := MsgResumed(job)
		SetCondition(status, kubeflowv1.JobSuspended, corev1.ConditionFalse, ReasonResumed, msg, p.now)
		p.event(corev1.EventTypeNormal, ReasonResumed, "Resume", "%s", msg)
	}

	// Past activeDeadlineSeconds (counted from startTime) the job fails and
	// everything it runs goes, as in v1: the framework deletes the JobSet,
	// the Services are the kind's.
	if sync.DeadlineExceeded {
		p.fail(ReasonFailed, MsgDeadline(job))
		p.out.Delete = append(p.out.Delete, services(obs)...)
		return
	}

	// 4. What planning and syncing the Services and JobSet did (when to look
	// again after an error is the framework's rule).
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
		// Transient: the framework retries (jobframework.Permanent).
		return
	}
	// What syncing wrote is the framework's to tell (jobframework.Decide,
	// SyncEvents for v1's warnings).
	js := sync.After(obs).JobSet(job.Name)

	// 5. Pods: v1's job-name label, then v1's status from them and the JobSet.
	pods := obs.PodsOf(js, "")
	p.out.Patches = labelPatches(d, pods)
	p.updateStatus(d, js, pods, suspended)
}

// updateStatus sets suspension, replica counts, Running/Restarting and the
// terminal condition from the pods of the current JobSet and the JobSet.
func (p *pass) updateStatus(d *kubeflowv1.PyTorchJob, js *jobsetv1alpha2.JobSet, pods []corev1.Pod, suspended bool) {
	job, status := p.job, p.status
	if suspended {
		// v1: a suspended job has no active pods (Kueue waits for that before
		// it considers a preempted job stopped).
		status.ReplicaStatuses = ReplicaStatuses(d, nil)
		for t, rs := range p.job.Status.ReplicaStatuses {
			if cur := status.ReplicaStatuses[t]; cur != nil && rs != nil {
				cur.Succeeded, cur.Failed = rs.Succeeded, rs.Failed
			}
		}
		msg := MsgSuspended(job)
		if IsTrue(status, kubeflowv1.JobRunning) {
			SetCondition(status, kubeflowv1.JobRunning, corev1.ConditionFalse, ReasonSuspended, msg, p.now)
		}
		if !IsTrue(status, kubeflowv1.JobSuspended) {
			SetCondition(status, kubeflowv1.JobSuspended, corev1.ConditionTrue, ReasonSuspended, msg, p.now)
			p.event(corev1.EventTypeNormal, ReasonSuspended, "Suspend", "%s", msg)
		}
		return
	}
	status.ReplicaStatuses = ReplicaStatuses(d, pods)
	for _, t := range UpdateRunning(d, status, p.now) {
		p.event(corev1.EventTypeWarning, t.Reason, "Restart", "%s", t.Message)
	}
	if t, reason, msg, ok := Terminal(d, js, status); ok {
		if t == kubeflowv1.JobFailed {
			p.fail(reason, msg)
			return
		}
		if SetCondition(status, t, corev1.ConditionTrue, reason, msg, p.now) {
			p.event(corev1.EventTypeNormal, reason, "Complete", "%s", msg)
		}
		if status.CompletionTime == nil {
			status.CompletionTime = p.now.DeepCopy()
		}
		succeedActive(status)
	}
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

// failValidation fails a job that can never run: v1 would have rejected it at
// admission. Failing it (rather than waiting for a fix) also tells Kueue the
// workload is finished, so it does not hold quota.
func (p *pass) failValidation(err error) {
	p.fail(ReasonFailedValidation, MsgFailedValidation(p.job, err))
}

// finished handles a succeeded or failed job: v1 moves still-active replicas
// of a succeeded job to succeeded and applies cleanPodPolicy (then the
// framework, the TTL).
func (p *pass) finished(obs *observe.Observed) {
	if IsTrue(p.status, kubeflowv1.JobSucceeded) {
		succeedActive(p.status)
	}
	p.out.Delete = cleanUp(Defaulted(p.job), obs)
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
