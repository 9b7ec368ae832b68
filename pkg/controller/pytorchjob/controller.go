// Package pytorchjob is Trainyard's controller for legacy kubeflow.org/v1
// PyTorchJobs. It runs each PyTorchJob through the same pipeline machinery as
// TrainJobs (pkg/legacy/pytorchjob builds the JobSet and Services with a
// framework.Framework) and keeps the JobSet in line with the shared
// pkg/jobsetsync rules; what it adds is v1's behaviour around it: in-memory
// defaulting and validation, the Services that give pods their v1 DNS names,
// v1 labels on the pods, v1 conditions and replica counts, activeDeadlineSeconds,
// cleanPodPolicy and ttlSecondsAfterFinished.
package pytorchjob

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/controller/ttl"
	"github.com/trainyard/trainyard/pkg/jobsetsync"
	legacy "github.com/trainyard/trainyard/pkg/legacy/pytorchjob"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
)

// FieldOwner is the field manager of every write; the same as the TrainJob
// controller's, as both are Trainyard.
const FieldOwner = "trainyard"

// Event reasons besides v1's condition reasons.
const (
	EventJobSetCreated       = "JobSetCreated"
	EventJobSetUpdated       = "JobSetUpdated"
	EventJobSetRecreated     = "JobSetRecreated"
	EventJobSetNotOwned      = "JobSetNotOwned"
	EventTemplateRestartPol  = "SetPodTemplateRestartPolicy"
	EventDeprecatedField     = "DeprecatedField"
	msgTemplateRestartPolicy = "Restart policy in pod template will be overwritten by restart policy in replica spec"
)

// notOwnedRetry is how often a job whose JobSet name is taken looks again.
const notOwnedRetry = time.Minute

// Reconciler reconciles PyTorchJobs.
type Reconciler struct {
	client.Client
	// APIReader reads what the manager does not cache (Services).
	APIReader client.Reader
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
}

// event is queued during a pass and sent once the status write succeeded, so
// that a failed (retried) pass does not repeat its events.
type event struct{ kind, reason, action, msg string }

// pass is the state of one reconciliation.
type pass struct {
	job    *kubeflowv1.PyTorchJob
	status *kubeflowv1.JobStatus
	now    metav1.Time
	evts   []event
}

func (p *pass) event(kind, reason, action, format string, args ...any) {
	p.evts = append(p.evts, event{kind, reason, action, fmt.Sprintf(format, args...)})
}

// +kubebuilder:rbac:groups=kubeflow.org,resources=pytorchjobs,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=kubeflow.org,resources=pytorchjobs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=kubeflow.org,resources=pytorchjobs/finalizers,verbs=update
// +kubebuilder:rbac:groups=jobset.x-k8s.io,resources=jobsets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=list;create;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch;update

// Reconcile gets the PyTorchJob, skips it when it is being deleted or another
// controller manages it (MultiKueue), does one pass and writes status once.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var job kubeflowv1.PyTorchJob
	if err := r.Get(ctx, req.NamespacedName, &job); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !job.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	log := ctrl.LoggerFrom(ctx)
	if m := job.Spec.RunPolicy.ManagedBy; m != nil && *m != kubeflowv1.KubeflowJobsController {
		log.V(3).Info("Skipping PyTorchJob managed by another controller", "managedBy", *m)
		return ctrl.Result{}, nil
	}

	// v1 timestamps travel with second precision; truncating keeps a status
	// that round-tripped through the API server equal to a recomputed one.
	p := &pass{job: &job, status: job.Status.DeepCopy(), now: metav1.NewTime(r.Clock.Now().Truncate(time.Second))}
	requeue, err := r.reconcile(ctx, p)
	if !equality.Semantic.DeepEqual(&job.Status, p.status) {
		updated := job.DeepCopy()
		updated.Status = *p.status
		if perr := r.Status().Patch(ctx, updated, client.MergeFrom(&job), client.FieldOwner(FieldOwner)); perr != nil {
			return ctrl.Result{}, errors.Join(err, fmt.Errorf("writing status of PyTorchJob %s: %w", job.Name, perr))
		}
		recordTransitions(&job.Status, p.status)
		if n := len(p.status.Conditions); n > 0 {
			log.V(2).Info("Status updated", "state", p.status.Conditions[n-1].Type, "reason", p.status.Conditions[n-1].Reason)
		}
	}
	for _, e := range p.evts {
		r.Recorder.Eventf(&job, nil, e.kind, e.reason, e.action, "%s", e.msg)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// reconcile acts for one pass and computes the new status in p.status. Input
// the user must fix fails the job (v1 rejected it at admission, so it never
// ran); API errors are returned for a retry.
func (r *Reconciler) reconcile(ctx context.Context, p *pass) (time.Duration, error) {
	job, status := p.job, p.status
	legacy.SetCreated(job, status, p.now)

	// 1. A finished job never runs again: clean up as cleanPodPolicy says,
	// and delete it past its TTL.
	if legacy.IsFinished(status) {
		return r.finished(ctx, p)
	}

	// 2. Validate what was written, then default in memory, as v1 did.
	warnings, errs := legacy.Validate(nil, job)
	if len(errs) > 0 {
		ctrl.LoggerFrom(ctx).V(2).Info("PyTorchJob failed validation", "errors", errs.ToAggregate().Error())
		return r.failValidation(p, errs.ToAggregate())
	}
	d := legacy.Defaulted(job)
	suspended := ptr.Deref(d.Spec.RunPolicy.Suspend, false)

	js, err := r.getJobSet(ctx, job)
	if err != nil {
		return 0, err
	}

	// 3. A resumed job counts its deadline from now; one that never ran from
	// its first unsuspended pass (v1's startTime).
	if !suspended {
		if legacy.IsTrue(status, kubeflowv1.JobSuspended) {
			msg := legacy.MsgResumed(job)
			legacy.SetCondition(status, kubeflowv1.JobSuspended, corev1.ConditionFalse, legacy.ReasonResumed, msg, p.now)
			status.StartTime = p.now.DeepCopy()
			p.event(corev1.EventTypeNormal, legacy.ReasonResumed, "Resume", "%s", msg)
		}
		if status.StartTime == nil {
			status.StartTime = p.now.DeepCopy()
		}
	}

	// Past activeDeadlineSeconds (counted from startTime) the job fails and
	// everything it runs goes, as in v1.
	if at, ok := deadline(d, status); ok && !suspended && !p.now.Before(&metav1.Time{Time: at}) {
		ctrl.LoggerFrom(ctx).V(2).Info("PyTorchJob past its active deadline", "activeDeadlineSeconds", *d.Spec.RunPolicy.ActiveDeadlineSeconds, "startTime", status.StartTime)
		r.fail(p, legacy.ReasonFailed, legacy.MsgDeadline(job))
		if owned(js, job) {
			if err := r.Delete(ctx, js, client.PropagationPolicy(metav1.DeletePropagationBackground),
				client.Preconditions{UID: &js.UID}); client.IgnoreNotFound(err) != nil {
				return 0, fmt.Errorf("deleting JobSet of PyTorchJob past its deadline: %w", err)
			}
		}
		if err := r.deleteServices(ctx, job); err != nil {
			return 0, err
		}
		return ttl.Remaining(d.Spec.RunPolicy.TTLSecondsAfterFinished, status.CompletionTime, p.now.Time), nil
	}

	// 4. Build the JobSet and Services through the pipeline.
	res, err := legacy.Build(d)
	if err != nil {
		if framework.IsInvalid(err) {
			return r.failValidation(p, err)
		}
		return 0, err
	}

	// 5. The Services exist before any pod can run: ensured while there is no
	// running JobSet (pods look their master up as soon as they start).
	if js == nil || ptr.Deref(js.Spec.Suspend, false) {
		if err := r.ensureServices(ctx, job, res.Services); err != nil {
			return 0, err
		}
	}

	// 6. The JobSet, by the shared rules (create; suspend; re-render while suspended).
	syncer := jobsetsync.Syncer{Client: r.Client, FieldOwner: FieldOwner}
	js, action, err := syncer.Sync(ctx, job, suspended, js, func(*jobsetv1alpha2.JobSet) (*jobsetv1alpha2.JobSet, error) {
		return res.JobSet.DeepCopy(), nil
	})
	switch {
	case errors.Is(err, jobsetsync.ErrNotOwned):
		p.event(corev1.EventTypeWarning, EventJobSetNotOwned, "Sync", "%v", err)
		return notOwnedRetry, nil
	case apierrors.IsAlreadyExists(err):
		// The cache has not seen the JobSet created a moment ago; look again.
		return time.Second, nil
	case err != nil:
		return 0, err
	}
	if action != jobsetsync.None {
		ctrl.LoggerFrom(ctx).V(2).Info("JobSet synced", "jobSet", js.Name, "action", action)
	}
	switch action {
	case jobsetsync.Created:
		p.event(corev1.EventTypeNormal, EventJobSetCreated, "Create", "Created JobSet %s", js.Name)
		// v1 warned on every pod it created; once per JobSet is enough.
		for _, t := range legacy.Roles(d) {
			if d.Spec.PyTorchReplicaSpecs[t].Template.Spec.RestartPolicy != "" {
				p.event(corev1.EventTypeWarning, EventTemplateRestartPol, "Create", "%s: %s", t, msgTemplateRestartPolicy)
			}
		}
		for _, w := range warnings {
			p.event(corev1.EventTypeWarning, EventDeprecatedField, "Create", "%s", w)
		}
	case jobsetsync.Recreated:
		p.event(corev1.EventTypeNormal, EventJobSetRecreated, "Create", "Recreated suspended JobSet %s: its immutable template changed", js.Name)
	case jobsetsync.Updated:
		p.event(corev1.EventTypeNormal, EventJobSetUpdated, "Update", "Updated suspended JobSet %s", js.Name)
	}

	// 7. Pods: v1's job-name label, then v1's status from them and the JobSet.
	pods, err := r.jobSetPods(ctx, job, js)
	if err != nil {
		return 0, err
	}
	if err := r.labelPods(ctx, d, pods); err != nil {
		return 0, err
	}
	r.updateStatus(p, d, js, pods, suspended)
	if legacy.IsFinished(status) {
		return ttl.Remaining(d.Spec.RunPolicy.TTLSecondsAfterFinished, status.CompletionTime, p.now.Time), nil
	}
	if at, ok := deadline(d, status); ok && !suspended {
		return max(at.Sub(p.now.Time), time.Second), nil
	}
	return 0, nil
}

// updateStatus sets suspension, replica counts, Running/Restarting and the
// terminal condition from the pods of the current JobSet and the JobSet.
func (r *Reconciler) updateStatus(p *pass, d *kubeflowv1.PyTorchJob, js *jobsetv1alpha2.JobSet, pods []corev1.Pod, suspended bool) {
	job, status := p.job, p.status
	if suspended {
		// v1: a suspended job has no active pods (Kueue waits for that before
		// it considers a preempted job stopped).
		status.ReplicaStatuses = legacy.ReplicaStatuses(d, nil)
		for t, rs := range p.job.Status.ReplicaStatuses {
			if cur := status.ReplicaStatuses[t]; cur != nil && rs != nil {
				cur.Succeeded, cur.Failed = rs.Succeeded, rs.Failed
			}
		}
		msg := legacy.MsgSuspended(job)
		if legacy.IsTrue(status, kubeflowv1.JobRunning) {
			legacy.SetCondition(status, kubeflowv1.JobRunning, corev1.ConditionFalse, legacy.ReasonSuspended, msg, p.now)
		}
		if !legacy.IsTrue(status, kubeflowv1.JobSuspended) {
			legacy.SetCondition(status, kubeflowv1.JobSuspended, corev1.ConditionTrue, legacy.ReasonSuspended, msg, p.now)
			p.event(corev1.EventTypeNormal, legacy.ReasonSuspended, "Suspend", "%s", msg)
		}
		return
	}
	status.ReplicaStatuses = legacy.ReplicaStatuses(d, pods)
	for _, t := range legacy.UpdateRunning(d, status, p.now) {
		p.event(corev1.EventTypeWarning, t.Reason, "Restart", "%s", t.Message)
	}
	if t, reason, msg, ok := legacy.Terminal(d, ownedOrNil(js, job), status); ok {
		if t == kubeflowv1.JobFailed {
			r.fail(p, reason, msg)
			return
		}
		if legacy.SetCondition(status, t, corev1.ConditionTrue, reason, msg, p.now) {
			p.event(corev1.EventTypeNormal, reason, "Complete", "%s", msg)
		}
		if status.CompletionTime == nil {
			status.CompletionTime = p.now.DeepCopy()
		}
		succeedActive(status)
	}
}

// fail sets Failed with its completion time, and says so in an event.
func (r *Reconciler) fail(p *pass, reason, msg string) {
	if legacy.SetCondition(p.status, kubeflowv1.JobFailed, corev1.ConditionTrue, reason, msg, p.now) {
		p.event(corev1.EventTypeWarning, reason, "Fail", "%s", msg)
	}
	if p.status.CompletionTime == nil {
		p.status.CompletionTime = p.now.DeepCopy()
	}
}

// failValidation fails a job that can never run: v1 would have rejected it at
// admission. Failing it (rather than waiting for a fix) also tells Kueue the
// workload is finished, so it does not hold quota.
func (r *Reconciler) failValidation(p *pass, err error) (time.Duration, error) {
	r.fail(p, legacy.ReasonFailedValidation, legacy.MsgFailedValidation(p.job, err))
	return ttl.Remaining(legacy.Defaulted(p.job).Spec.RunPolicy.TTLSecondsAfterFinished, p.status.CompletionTime, p.now.Time), nil
}

// finished handles a succeeded or failed job: v1 moves still-active replicas
// of a succeeded job to succeeded, applies cleanPodPolicy, then the TTL.
func (r *Reconciler) finished(ctx context.Context, p *pass) (time.Duration, error) {
	d := legacy.Defaulted(p.job)
	if legacy.IsTrue(p.status, kubeflowv1.JobSucceeded) {
		succeedActive(p.status)
	}
	if err := r.cleanUp(ctx, d); err != nil {
		return 0, err
	}
	return ttl.Expire(ctx, r.Client, d, d.Spec.RunPolicy.TTLSecondsAfterFinished, p.status.CompletionTime, p.now.Time)
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

// deadline is when a job with activeDeadlineSeconds fails: v1 counts from
// status.startTime (its first reconcile, or its last resume).
func deadline(job *kubeflowv1.PyTorchJob, status *kubeflowv1.JobStatus) (time.Time, bool) {
	ads := job.Spec.RunPolicy.ActiveDeadlineSeconds
	if ads == nil || status.StartTime == nil {
		return time.Time{}, false
	}
	return status.StartTime.Add(time.Duration(*ads) * time.Second), true
}

// getJobSet returns the JobSet named after the job, or nil.
func (r *Reconciler) getJobSet(ctx context.Context, job *kubeflowv1.PyTorchJob) (*jobsetv1alpha2.JobSet, error) {
	var js jobsetv1alpha2.JobSet
	if err := r.Get(ctx, client.ObjectKeyFromObject(job), &js); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("getting JobSet %s: %w", job.Name, err)
	}
	return &js, nil
}

func owned(js *jobsetv1alpha2.JobSet, job *kubeflowv1.PyTorchJob) bool {
	if js == nil {
		return false
	}
	ref := metav1.GetControllerOf(js)
	return ref != nil && ref.UID == job.UID
}

func ownedOrNil(js *jobsetv1alpha2.JobSet, job *kubeflowv1.PyTorchJob) *jobsetv1alpha2.JobSet {
	if owned(js, job) {
		return js
	}
	return nil
}
