package trainjob

import (
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/childsync"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
	"github.com/trainyard/trainyard/pkg/observe"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
)

// pass collects what one Status call decides.
type pass struct {
	job    *trainer.TrainJob
	status *trainer.TrainJobStatus
	now    time.Time
	out    jobframework.Outcome
}

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
	}
}

// Status implements jobframework.Adapter: the TrainJob's new status from what
// was observed and what syncing its plan did. Errors the user must fix are
// reported in status and not retried (a change of the TrainJob or its runtime
// triggers a new pass); API errors are reported and retried with backoff.
func (a *Adapter) Status(o client.Object, obs *observe.Observed, sync jobframework.Sync, now time.Time) jobframework.Outcome {
	job := o.(*trainer.TrainJob)
	updated := job.DeepCopy()
	p := &pass{job: job, status: &updated.Status, now: now}
	p.out.Job = updated
	a.status(p, obs, sync)
	return p.out
}

func (a *Adapter) status(p *pass, obs *observe.Observed, sync jobframework.Sync) {
	job, status, now := p.job, p.status, p.now
	js := obs.JobSet(job.Name)

	// 1. A finished job only follows its JobSet's counts; it never gets a new
	// one. Past its TTL the framework deletes it, and its JobSet with it.
	if finished(status) {
		followJobSet(status, a.Framework.Status(job.Name, obs))
		summarize(job, js, obs, status, now, nil)
		if js == nil {
			// As upstream, a missing JobSet changes nothing once the job is
			// finished (deleted with the namespace, or by hand): the job keeps
			// the counts it ended with, and costs no status write.
			status.NumNodes, status.ReadyNodes = job.Status.NumNodes, job.Status.ReadyNodes
		}
		return
	}

	// A JobSet that finished and went before the job's status said so (its
	// own TTL, or deleted by hand) still says how the job ended.
	if in, ok := obs.Inputs.(*inputs); ok && js == nil && in.gone != nil {
		obs, js = withJobSet(obs, in.gone), in.gone
	}

	// 2. Past its deadline a job fails (the framework deletes its JobSet),
	// unless its JobSet finished first and went before status said so.
	if _, jobSetDone := observe.Finished(js); sync.DeadlineExceeded && !jobSetDone {
		p.setCondition(trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobDeadlineExceededReason, "TrainJob exceeded its active deadline")
		p.event(corev1.EventTypeWarning, EventDeadlineExceeded, "Fail", "TrainJob ran past activeDeadlineSeconds=%d", *job.Spec.ActiveDeadlineSeconds)
		summarize(job, nil, obs, status, now, nil)
		return
	}

	// 3. What planning and syncing the JobSet did (what it wrote is the
	// framework's to tell: jobframework.Decide).
	after := sync.After(obs)
	p.synced(after.JobSet(job.Name), sync)

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
	facts := a.Framework.Status(job.Name, after)
	followJobSet(status, facts)
	if c := meta.FindStatusCondition(status.Conditions, trainer.TrainJobComplete); !wasComplete && c != nil && c.Status == metav1.ConditionTrue {
		p.event(corev1.EventTypeNormal, EventCompleted, "Complete", "TrainJob completed: %s", c.Message)
	}
	if c := meta.FindStatusCondition(status.Conditions, trainer.TrainJobFailed); !wasFailed && c != nil && c.Status == metav1.ConditionTrue {
		p.event(corev1.EventTypeWarning, EventFailed, "Fail", "TrainJob failed (%s): %s", c.Reason, c.Message)
	}
	summarize(job, after.JobSet(job.Name), after, status, now, facts.Gang)
	p.restarts(after.JobSet(job.Name))
	if status.Reason != job.Status.Reason && (status.Reason == ReasonExceedsQueueCapacity || status.Reason == ReasonPreempted || status.Reason == ReasonInadmissible) {
		p.event(corev1.EventTypeWarning, status.Reason, "Queue", "%s", status.Message)
	}
	if status.Phase == trainer.TrainJobRunning && job.Status.Phase != trainer.TrainJobRunning {
		p.event(corev1.EventTypeNormal, EventRunning, "Run", "%s", status.Message)
	}
}

// synced reports errors of planning and syncing in Created=False. Upstream's
// TrainJob has no Created condition (Kubeflow Trainer removed it in 2025):
// Trainyard sets one only to report an error the user must see, and removes
// it once the error is resolved. Which errors are retried is the framework's
// rule (jobframework.Permanent).
func (p *pass) synced(js *jobsetv1alpha2.JobSet, sync jobframework.Sync) {
	status := p.status
	err := sync.Err
	switch {
	case err == nil:
		if js != nil {
			meta.RemoveStatusCondition(&status.Conditions, trainer.TrainJobCreated)
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
		// One found by a lookup (a PriorityClass not created yet) is looked
		// at again later: the framework's retry timing.
		p.createdFalse(trainer.TrainJobBuildFailedReason, EventBuildFailed, "Build", err)
	case errors.Is(err, childsync.ErrNotOwned):
		p.createdFalse(trainer.TrainJobJobSetNotOwnedReason, EventJobSetNotOwned, "Sync", err)
	case errors.Is(err, childsync.ErrKindNotServed):
		p.createdFalse(trainer.TrainJobChildKindNotServedReason, EventKindNotServed, "Apply", err)
	default:
		// Transient (API errors, conflicts): retried with backoff. Before the
		// JobSet exists, say so in status; once it runs, a failed write of
		// another child does not make the job any less created.
		if js == nil && !apierrors.IsAlreadyExists(err) && !apierrors.IsConflict(err) {
			p.createdFalse(trainer.TrainJobApplyFailedReason, EventApplyFailed, "Apply", err)
		}
	}
}

// followJobSet puts what the status plugins read of the JobSet into the
// status: how it finished into Complete or Failed (reason and message
// verbatim), and its replicated jobs' counts into jobsStatus, in the
// JobSet's order.
func followJobSet(status *trainer.TrainJobStatus, facts framework.Facts) {
	if f := facts.Finished; f != nil {
		t := trainer.TrainJobComplete
		if f.Failed {
			t = trainer.TrainJobFailed
		}
		setTerminal(status, t, f)
	}
	if facts.Jobs == nil {
		return // no JobSet: the counts stay as they were
	}
	status.JobsStatus = nil
	for _, c := range facts.Jobs {
		status.JobsStatus = append(status.JobsStatus, trainer.JobStatus{
			Name:      c.Name,
			Ready:     ptr.To(c.Ready),
			Succeeded: ptr.To(c.Succeeded),
			Failed:    ptr.To(c.Failed),
			Active:    ptr.To(c.Active),
			Suspended: ptr.To(c.Suspended),
		})
	}
}

// setTerminal sets a terminal condition from how the JobSet finished, once:
// the first terminal condition stays as first observed.
func setTerminal(status *trainer.TrainJobStatus, condType string, f *observe.Finish) {
	for _, c := range status.Conditions {
		if (c.Type == trainer.TrainJobComplete || c.Type == trainer.TrainJobFailed) && c.Status == metav1.ConditionTrue {
			return
		}
	}
	c := metav1.Condition{Type: condType, Status: metav1.ConditionTrue, Reason: f.Reason, Message: f.Message, LastTransitionTime: f.Time}
	for k := range status.Conditions {
		if status.Conditions[k].Type == condType {
			status.Conditions[k] = c
			return
		}
	}
	status.Conditions = append(status.Conditions, c)
}
