package trainjob

import (
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/childsync"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
	"github.com/trainyard/trainyard/pkg/controller/ttl"
	"github.com/trainyard/trainyard/pkg/metrics"
	"github.com/trainyard/trainyard/pkg/observe"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
)

// pass collects what one Status call decides.
type pass struct {
	job     *trainer.TrainJob
	status  *trainer.TrainJobStatus
	now     time.Time
	out     jobframework.Outcome
	record  []func()
	metrics *metrics.TrainJob
	// recheck: the build failed on a lookup, so look again after LookupRecheck.
	recheck bool
	// syncEvents and syncRecords are how many of the events and metrics say
	// what syncing did; the others follow from the status change.
	syncEvents, syncRecords int
}

// LookupRecheck is how soon a job whose build failed on a lookup of another
// object (a missing PriorityClass) is looked at again.
const LookupRecheck = 30 * time.Second

func (p *pass) event(kind, reason, action, format string, args ...any) {
	p.out.Events = append(p.out.Events, jobframework.Event{Type: kind, Reason: reason, Action: action, Message: fmt.Sprintf(format, args...)})
}

// setCondition sets a condition with the job's generation and reports whether
// anything but the observed generation changed.
func (p *pass) setCondition(t string, s metav1.ConditionStatus, reason, msg string) bool {
	return setCondition(p.status, p.job.Generation, p.now, t, s, reason, msg)
}

// fail reports an error the user must fix in Created=False (an event and a
// metric when it is new).
func (p *pass) createdFalse(reason, evReason, action string, err error) {
	if p.setCondition(trainer.TrainJobCreated, metav1.ConditionFalse, reason, err.Error()) {
		p.event(corev1.EventTypeWarning, evReason, action, "%v", err)
		p.record = append(p.record, func() { p.metrics.Error(reason) })
	}
}

// Status implements jobframework.Adapter: the TrainJob's new status from what
// was observed and what syncing its plan did. Errors the user must fix are
// reported in status and not retried (a change of the TrainJob or its runtime
// triggers a new pass); API errors are reported and retried with backoff.
func (a *Adapter) Status(o client.Object, obs *observe.Observed, sync jobframework.Sync, now time.Time) jobframework.Outcome {
	job := o.(*trainer.TrainJob)
	updated := job.DeepCopy()
	p := &pass{job: job, status: &updated.Status, now: now, metrics: a.Metrics}
	p.out.Job = updated
	a.status(p, obs, sync)
	p.out.CountsOnly = countsOnly(&job.Status, p.status)
	if !p.out.DeferStatus && sync.Err == nil && !equality.Semantic.DeepEqual(&job.Status, p.status) && kueueStarting(job) {
		// Kueue is between the two writes that start or stop the job: a
		// status write now would make the second one conflict. The second
		// write brings the next pass; the bound, one that finds Kueue stuck.
		p.out.DeferStatus, p.out.DeferFor = true, KueueWriteGrace
	}
	if oldPhase, newPhase := job.Status.Phase, p.status.Phase; newPhase != oldPhase {
		p.record = append(p.record, func() { p.metrics.Transition(string(newPhase)) })
	}
	// A deferred status tells only what syncing did (the JobSet's creation):
	// events and metrics that follow from the status change (Suspended) come
	// with the status, from the pass that writes it, or they would be sent
	// twice.
	p.out.SyncEvents = p.syncEvents
	p.out.Record, p.out.SyncRecord = calls(p.record), calls(p.record[:p.syncRecords])
	return p.out
}

// calls is one function that calls fs in order.
func calls(fs []func()) func() {
	return func() {
		for _, f := range fs {
			f()
		}
	}
}

func (a *Adapter) status(p *pass, obs *observe.Observed, sync jobframework.Sync) {
	job, status, now := p.job, p.status, p.now
	js := obs.JobSet(job.Name)

	// 1. A finished job only follows its JobSet's counts; it never gets a new
	// one. Past its TTL it is deleted, and its JobSet with it.
	if finished(status) {
		a.Framework.Status(job, obs, status)
		summarize(job, js, obs, status, now, nil)
		if js == nil {
			// As upstream, a missing JobSet changes nothing once the job is
			// finished (deleted with the namespace, or by hand): the job keeps
			// the counts it ended with, and costs no status write.
			status.NumNodes, status.ReadyNodes = job.Status.NumNodes, job.Status.ReadyNodes
		}
		p.expire()
		return
	}

	// 2. Past its deadline a job fails, and its JobSet goes, unless the
	// JobSet finished first (and status had not caught up yet).
	if at, ok := deadline(job, status); ok && !now.Before(at) && !jobSetFinished(js) {
		p.setCondition(trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobDeadlineExceededReason, "TrainJob exceeded its active deadline")
		p.event(corev1.EventTypeWarning, EventDeadlineExceeded, "Fail", "TrainJob ran past activeDeadlineSeconds=%d", *job.Spec.ActiveDeadlineSeconds)
		if js != nil {
			p.out.Delete = append(p.out.Delete, js)
		}
		summarize(job, nil, obs, status, now, nil)
		p.expire()
		return
	}

	// 3. What planning and syncing the JobSet did.
	after := sync.After(obs)
	p.synced(after.JobSet(job.Name), sync)
	p.syncEvents, p.syncRecords = len(p.out.Events), len(p.record)

	// 4. Suspension, and what the children report.
	if changed, suspended := setSuspended(job, status, now); changed {
		if suspended {
			p.event(corev1.EventTypeNormal, EventSuspended, "Suspend", "TrainJob is suspended")
		} else {
			p.event(corev1.EventTypeNormal, EventResumed, "Resume", "TrainJob is resumed")
		}
	}
	wasComplete := condTrue(status, trainer.TrainJobComplete)
	wasFailed := condTrue(status, trainer.TrainJobFailed)
	a.Framework.Status(job, after, status)
	if c := meta.FindStatusCondition(status.Conditions, trainer.TrainJobComplete); !wasComplete && c != nil && c.Status == metav1.ConditionTrue {
		p.event(corev1.EventTypeNormal, EventCompleted, "Complete", "TrainJob completed: %s", c.Message)
	}
	if c := meta.FindStatusCondition(status.Conditions, trainer.TrainJobFailed); !wasFailed && c != nil && c.Status == metav1.ConditionTrue {
		p.event(corev1.EventTypeWarning, EventFailed, "Fail", "TrainJob failed (%s): %s", c.Reason, c.Message)
	}
	summarize(job, after.JobSet(job.Name), after, status, now, func() (string, string, bool) {
		return a.Framework.GangWaiting(job, after)
	})
	p.restarts(after.JobSet(job.Name))
	if status.Reason != job.Status.Reason && (status.Reason == ReasonExceedsQueueCapacity || status.Reason == ReasonPreempted || status.Reason == ReasonInadmissible) {
		p.event(corev1.EventTypeWarning, status.Reason, "Queue", "%s", status.Message)
	}
	if status.Phase == trainer.TrainJobRunning && job.Status.Phase != trainer.TrainJobRunning {
		p.event(corev1.EventTypeNormal, EventRunning, "Run", "%s", status.Message)
		pending := now.Sub(pendingSince(job, status)).Seconds()
		p.record = append(p.record, func() { p.metrics.TimePending(pending) })
	}

	switch at, ok := deadline(job, status); {
	case finished(status) && job.Spec.TTLSecondsAfterFinished != nil:
		// This pass writes the final status; the next one deletes the job once
		// its TTL has passed. (The controller's own status write wakes nothing.)
		p.out.Requeue = max(ttl.Remaining(job.Spec.TTLSecondsAfterFinished, status.CompletionTime, now), time.Millisecond)
	case ok && !finished(status):
		p.out.Requeue = at.Sub(now)
	}
	if p.recheck && (p.out.Requeue == 0 || p.out.Requeue > LookupRecheck) {
		p.out.Requeue = LookupRecheck
	}
}

// synced reports errors of planning and syncing in Created=False, and sends
// the events of what syncing did. Upstream's TrainJob has no Created condition
// (Kubeflow Trainer removed it in 2025): Trainyard sets one only to report an
// error the user must see, and removes it once the error is resolved.
func (p *pass) synced(js *jobsetv1alpha2.JobSet, sync jobframework.Sync) {
	job, status := p.job, p.status
	err := sync.Err
	switch {
	case err == nil:
		if js != nil {
			meta.RemoveStatusCondition(&status.Conditions, trainer.TrainJobCreated)
		}
		switch sync.Result.Action(observe.JobSetKind, job.Name) {
		case childsync.Created:
			// The pass that created the JobSet sends its event and leaves the
			// status write to the pass the JobSet's creation event brings (at
			// child priority): under a burst of submissions, new TrainJobs get
			// their JobSets first, and each job's first status write coalesces
			// with its JobSet's first status.
			p.event(corev1.EventTypeNormal, EventJobSetCreated, "Create", "Created JobSet %s", js.Name)
			p.out.DeferStatus = true
			since := p.now.Sub(job.CreationTimestamp.Time).Seconds()
			p.record = append(p.record, func() { p.metrics.TimeToJobSet(since) })
		case childsync.Recreated:
			p.event(corev1.EventTypeNormal, EventJobSetRecreated, "Create", "Recreated suspended JobSet %s: its immutable template changed", js.Name)
		case childsync.Updated:
			p.event(corev1.EventTypeNormal, EventJobSetUpdated, "Update", "Updated suspended JobSet %s", js.Name)
		}
	case errors.Is(err, runtime.ErrUnsupported):
		// Terminal, as in the Kubeflow API: the reference can never resolve.
		p.setCondition(trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobRuntimeNotSupportedReason, err.Error())
		p.event(corev1.EventTypeWarning, EventRuntimeNotSupport, "Fail", "%v", err)
	case errors.Is(err, runtime.ErrNotFound) && js != nil && !ptr.Deref(js.Spec.Suspend, false):
		// A running JobSet without a readable snapshot (written by an older
		// version) needs no plan: it is never re-rendered while it runs.
	case errors.Is(err, runtime.ErrNotFound):
		p.createdFalse(trainer.TrainJobRuntimeNotFound, EventRuntimeNotFound, "Resolve", err)
	case framework.IsInvalid(err):
		p.createdFalse(trainer.TrainJobBuildFailedReason, EventBuildFailed, "Build", err)
		if framework.NeedsRecheck(err) {
			// Found by a lookup (a PriorityClass not created yet): nothing
			// about the job will change to wake it, so look again.
			p.recheck = true
		}
	case errors.Is(err, childsync.ErrNotOwned):
		p.createdFalse(trainer.TrainJobJobSetNotOwnedReason, EventJobSetNotOwned, "Sync", err)
	case errors.Is(err, childsync.ErrKindNotServed):
		p.createdFalse(trainer.TrainJobChildKindNotServedReason, EventKindNotServed, "Apply", err)
	default:
		// Transient (API errors, conflicts): retry with backoff. Before the
		// JobSet exists, say so in status; once it runs, a failed write of
		// another child does not make the job any less created.
		if js == nil && !apierrors.IsAlreadyExists(err) && !apierrors.IsConflict(err) {
			p.createdFalse(trainer.TrainJobApplyFailedReason, EventApplyFailed, "Apply", err)
		}
		p.out.Retry = err
	}
}

// expire deletes a finished job past its TTL, or says when to look again.
func (p *pass) expire() {
	del, left := ttl.Expire(p.job, p.job.Spec.TTLSecondsAfterFinished, p.status.CompletionTime, p.now)
	if del != nil {
		p.out.Delete = append(p.out.Delete, del)
	}
	p.out.Requeue = left
}

// countsOnly reports whether status differs from old in counts only: the
// JobSet's job counts and the message of an unchanged reason ("1/2 nodes
// running"). Such a change may wait for the next transition before it is
// written; a change of anything kubectl get shows (State, Ready) or of a
// reason or condition (what clients wait for) may not wait as long.
func countsOnly(old, status *trainer.TrainJobStatus) bool {
	if old.Phase == "" || old.Reason != status.Reason || equality.Semantic.DeepEqual(old, status) {
		return false
	}
	s := *status
	s.JobsStatus, s.Message = old.JobsStatus, old.Message
	return equality.Semantic.DeepEqual(&s, old)
}

// jobSetFinished reports whether the JobSet says it completed or failed.
func jobSetFinished(js *jobsetv1alpha2.JobSet) bool {
	if js == nil {
		return false
	}
	return meta.IsStatusConditionTrue(js.Status.Conditions, string(jobsetv1alpha2.JobSetCompleted)) ||
		meta.IsStatusConditionTrue(js.Status.Conditions, string(jobsetv1alpha2.JobSetFailed))
}
