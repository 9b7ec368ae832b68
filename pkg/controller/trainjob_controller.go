// Package controller holds Trainyard's TrainJob controller: it resolves each
// TrainJob with the runtime pipeline into one JobSet, keeps that JobSet in line
// with the TrainJob (suspend, resume, Kueue's admission changes), and reports the
// JobSet's progress back in the TrainJob's status.
package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/controller/ttl"
	"github.com/trainyard/trainyard/pkg/jobsetsync"
	"github.com/trainyard/trainyard/pkg/metrics"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
)

// TrainJobReconciler reconciles TrainJobs.
type TrainJobReconciler struct {
	client.Client
	Framework *framework.Framework
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
	// Kueue is true when Kueue's Workload API is served: status then explains
	// why a queued job waits.
	Kueue bool
}

// event is queued during a pass and sent only once the status write succeeded,
// so that a failed pass (retried) does not repeat its events.
type event struct {
	kind, reason, action, msg string
}

// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainjobs,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainjobs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainjobs/finalizers,verbs=update
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainingruntimes;clustertrainingruntimes,verbs=get;list;watch
// +kubebuilder:rbac:groups=jobset.x-k8s.io,resources=jobsets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch;update

// Reconcile gets the TrainJob, skips it when it is being deleted or belongs to
// another controller, brings its JobSet in line, and writes status once.
func (r *TrainJobReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var job trainer.TrainJob
	if err := r.Get(ctx, req.NamespacedName, &job); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !job.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	if m := job.Spec.ManagedBy; m != nil && *m != trainer.TrainJobControllerName {
		return ctrl.Result{}, nil
	}
	log := ctrl.LoggerFrom(ctx)

	status, evts, requeue, created, err := r.reconcile(ctx, &job)
	// A pass that created the JobSet leaves the status write to the pass the
	// JobSet's creation event brings (at child priority): under a burst of
	// submissions, new TrainJobs get their JobSets first, and each job's first
	// status write coalesces with its JobSet's first status.
	// Its events, which follow from status transitions, go with that write.
	if created && err == nil {
		return ctrl.Result{RequeueAfter: requeue}, nil
	}
	if !equality.Semantic.DeepEqual(&job.Status, status) {
		updated := job.DeepCopy()
		updated.Status = *status
		if perr := r.Status().Patch(ctx, updated, client.MergeFrom(&job), client.FieldOwner(FieldOwner)); perr != nil {
			return ctrl.Result{}, errors.Join(err, fmt.Errorf("writing status of TrainJob %s: %w", job.Name, perr))
		}
		log.V(2).Info("Status updated", "phase", status.Phase, "reason", status.Reason)
		if status.Phase != job.Status.Phase {
			metrics.Transitions.WithLabelValues(string(status.Phase)).Inc()
		}
	}
	for _, e := range evts {
		r.Recorder.Eventf(&job, nil, e.kind, e.reason, e.action, "%s", e.msg)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// reconcile computes the new status of one TrainJob, acting on its JobSet on the
// way. Errors the user must fix are reported in status and not returned (a retry
// would not help; a change of the TrainJob or its runtime triggers a new pass).
func (r *TrainJobReconciler) reconcile(ctx context.Context, job *trainer.TrainJob) (_ *trainer.TrainJobStatus, _ []event, _ time.Duration, created bool, _ error) {
	status := job.Status.DeepCopy()
	var evts []event
	addEvent := func(kind, reason, action, format string, args ...any) {
		evts = append(evts, event{kind, reason, action, fmt.Sprintf(format, args...)})
	}
	gen := job.Generation

	js, err := r.getJobSet(ctx, job)
	if err != nil {
		return status, nil, 0, created, err
	}

	now := r.Clock.Now()

	// 1. A finished job only follows its JobSet's counts; it never gets a new
	// one. Past its TTL it is deleted, and its JobSet with it.
	if finished(status) {
		r.Framework.Status(job, ownedOrNil(js, job), status)
		if err := r.summarize(ctx, job, ownedOrNil(js, job), status, now); err != nil {
			return status, nil, 0, created, err
		}
		requeue, err := ttl.Expire(ctx, r.Client, job, job.Spec.TTLSecondsAfterFinished, status.CompletionTime, now)
		return status, nil, requeue, created, err
	}

	// 2. Past its deadline a job fails, and its JobSet goes.
	if at, ok := deadline(job, status); ok && !now.Before(at) {
		setCondition(status, gen, trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobDeadlineExceededReason,
			"TrainJob exceeded its active deadline")
		addEvent(corev1.EventTypeWarning, EventDeadlineExceeded, "Fail", "TrainJob ran past activeDeadlineSeconds=%d", *job.Spec.ActiveDeadlineSeconds)
		if js != nil && metav1IsControlledBy(js, job) {
			if err := r.Delete(ctx, js, client.PropagationPolicy("Background")); client.IgnoreNotFound(err) != nil {
				return status, evts, 0, created, fmt.Errorf("deleting JobSet of TrainJob past its deadline: %w", err)
			}
		}
		if err := r.summarize(ctx, job, nil, status, now); err != nil {
			return status, evts, 0, created, err
		}
		requeue, err := ttl.Expire(ctx, r.Client, job, job.Spec.TTLSecondsAfterFinished, status.CompletionTime, now)
		return status, evts, requeue, created, err
	}

	// 3. Bring the JobSet in line with the TrainJob, and say how that went.
	var retErr error
	js, action, err := r.syncJobSet(ctx, job, js)
	switch {
	case err == nil:
		if js != nil {
			// The event goes with the status that first says Created, so that it
			// is sent once, even if the manager dies between the two writes.
			if !condTrue(status, trainer.TrainJobCreated) {
				addEvent(corev1.EventTypeNormal, EventJobSetCreated, "Create", "Created JobSet %s", js.Name)
			}
			setCondition(status, gen, trainer.TrainJobCreated, metav1.ConditionTrue, trainer.TrainJobCreatedReason,
				fmt.Sprintf("JobSet %s runs this TrainJob", js.Name))
		}
		switch action {
		case jobsetsync.Created:
			created = true
			metrics.TimeToJobSet.Observe(now.Sub(job.CreationTimestamp.Time).Seconds())
		case jobsetsync.Recreated:
			addEvent(corev1.EventTypeNormal, EventJobSetRecreated, "Create", "Recreated suspended JobSet %s: its immutable template changed", js.Name)
		case jobsetsync.Updated:
			addEvent(corev1.EventTypeNormal, EventJobSetUpdated, "Update", "Updated suspended JobSet %s", js.Name)
		}
	case errors.Is(err, errUnsupportedRuntime):
		// Terminal, as in the Kubeflow API: the reference can never resolve.
		setCondition(status, gen, trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobRuntimeNotSupportedReason, err.Error())
		addEvent(corev1.EventTypeWarning, EventRuntimeNotSupport, "Fail", "%v", err)
	case errors.Is(err, errRuntimeNotFound):
		if setCondition(status, gen, trainer.TrainJobCreated, metav1.ConditionFalse, trainer.TrainJobRuntimeNotFound, err.Error()) {
			addEvent(corev1.EventTypeWarning, EventRuntimeNotFound, "Resolve", "%v", err)
			metrics.Errors.WithLabelValues(trainer.TrainJobRuntimeNotFound).Inc()
		}
	case framework.IsInvalid(err), errors.Is(err, errJobSetNotOwned):
		reason, evReason := trainer.TrainJobBuildFailedReason, EventBuildFailed
		if errors.Is(err, errJobSetNotOwned) {
			reason, evReason = trainer.TrainJobApplyFailedReason, EventJobSetNotOwned
		}
		if setCondition(status, gen, trainer.TrainJobCreated, metav1.ConditionFalse, reason, err.Error()) {
			addEvent(corev1.EventTypeWarning, evReason, "Build", "%v", err)
			metrics.Errors.WithLabelValues(reason).Inc()
		}
	default:
		// Transient (API errors, conflicts): say so in status, and retry with backoff.
		if !apierrors.IsAlreadyExists(err) && !apierrors.IsConflict(err) {
			if setCondition(status, gen, trainer.TrainJobCreated, metav1.ConditionFalse, trainer.TrainJobApplyFailedReason, err.Error()) {
				addEvent(corev1.EventTypeWarning, EventApplyFailed, "Apply", "%v", err)
				metrics.Errors.WithLabelValues(trainer.TrainJobApplyFailedReason).Inc()
			}
		}
		retErr = err
	}

	// 4. Suspension, and what the JobSet reports.
	if changed, suspended := setSuspended(job, status); changed {
		if suspended {
			addEvent(corev1.EventTypeNormal, EventSuspended, "Suspend", "TrainJob is suspended")
		} else {
			addEvent(corev1.EventTypeNormal, EventResumed, "Resume", "TrainJob is resumed")
		}
	}
	owned := ownedOrNil(js, job)
	wasComplete := meta.IsStatusConditionTrue(status.Conditions, trainer.TrainJobComplete)
	wasFailed := meta.IsStatusConditionTrue(status.Conditions, trainer.TrainJobFailed)
	r.Framework.Status(job, owned, status)
	if c := meta.FindStatusCondition(status.Conditions, trainer.TrainJobComplete); !wasComplete && c != nil && c.Status == metav1.ConditionTrue {
		addEvent(corev1.EventTypeNormal, EventCompleted, "Complete", "TrainJob completed: %s", c.Message)
	}
	if c := meta.FindStatusCondition(status.Conditions, trainer.TrainJobFailed); !wasFailed && c != nil && c.Status == metav1.ConditionTrue {
		addEvent(corev1.EventTypeWarning, EventFailed, "Fail", "TrainJob failed (%s): %s", c.Reason, c.Message)
	}
	oldPhase := job.Status.Phase
	if err := r.summarize(ctx, job, owned, status, now); err != nil {
		return status, evts, 0, created, errors.Join(retErr, err)
	}
	if status.Reason != job.Status.Reason && (status.Reason == ReasonExceedsQueueCapacity || status.Reason == ReasonPreempted || status.Reason == ReasonInadmissible) {
		addEvent(corev1.EventTypeWarning, status.Reason, "Queue", "%s", status.Message)
	}
	if status.Phase == trainer.TrainJobRunning && oldPhase != trainer.TrainJobRunning {
		addEvent(corev1.EventTypeNormal, EventRunning, "Run", "%s", status.Message)
		metrics.TimePending.Observe(now.Sub(pendingSince(job, status)).Seconds())
	}

	var requeue time.Duration
	switch at, ok := deadline(job, status); {
	case finished(status) && job.Spec.TTLSecondsAfterFinished != nil:
		// This pass writes the final status; the next one deletes the job once
		// its TTL has passed. (The controller's own status write wakes nothing.)
		requeue = max(ttl.Remaining(job.Spec.TTLSecondsAfterFinished, status.CompletionTime, now), time.Millisecond)
	case ok && !finished(status):
		requeue = at.Sub(now)
	}
	return status, evts, requeue, created, retErr
}

// getJobSet returns the JobSet named after the TrainJob, or nil.
func (r *TrainJobReconciler) getJobSet(ctx context.Context, job *trainer.TrainJob) (*jobsetv1alpha2.JobSet, error) {
	var js jobsetv1alpha2.JobSet
	if err := r.Get(ctx, client.ObjectKeyFromObject(job), &js); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("getting JobSet %s: %w", job.Name, err)
	}
	return &js, nil
}

func ownedOrNil(js *jobsetv1alpha2.JobSet, job *trainer.TrainJob) *jobsetv1alpha2.JobSet {
	if js != nil && metav1IsControlledBy(js, job) {
		return js
	}
	return nil
}

// metav1IsControlledBy checks the controller owner reference by UID.
func metav1IsControlledBy(obj metav1.Object, owner metav1.Object) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.UID == owner.GetUID()
}
