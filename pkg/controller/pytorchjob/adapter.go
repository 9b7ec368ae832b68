package pytorchjob

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
	"github.com/trainyard/trainyard/pkg/observe"
	"github.com/trainyard/trainyard/pkg/plan"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
)

// +kubebuilder:rbac:groups=kubeflow.org,resources=pytorchjobs,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=kubeflow.org,resources=pytorchjobs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=kubeflow.org,resources=pytorchjobs/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;patch;delete

// FieldOwner is the field manager of every write.
const FieldOwner = jobframework.FieldOwner

// Event reasons besides v1's condition reasons.
const (
	EventJobSetCreated   = jobframework.EventJobSetCreated
	EventJobSetUpdated   = jobframework.EventJobSetUpdated
	EventJobSetRecreated = jobframework.EventJobSetRecreated
	EventJobSetNotOwned  = jobframework.EventJobSetNotOwned
	// EventKindNotServed: a child's kind (a CRD) is not installed.
	EventKindNotServed       = "ChildKindNotServed"
	EventTemplateRestartPol  = "SetPodTemplateRestartPolicy"
	EventDeprecatedField     = "DeprecatedField"
	msgTemplateRestartPolicy = "Restart policy in pod template will be overwritten by restart policy in replica spec"
)

// Adapter is the PyTorchJob kind.
type Adapter struct {
	// Framework is the PyTorchJob pipeline (NewFramework), built once.
	Framework *framework.Framework
	// GangScheduler is the gang scheduler of every PyTorchJob (none when "").
	GangScheduler GangScheduler
	// Metrics are the manager's PyTorchJob metrics (nil: none recorded).
	Metrics *Metrics
}

var _ jobframework.Adapter = Adapter{}

// Kind implements jobframework.Adapter.
func (Adapter) Kind() string { return kubeflowv1.PyTorchJobKind }

// New implements jobframework.Adapter.
func (Adapter) New() client.Object { return &kubeflowv1.PyTorchJob{} }

// Ours implements jobframework.Adapter: a job another controller manages
// (MultiKueue) is left alone.
func (Adapter) Ours(o client.Object) bool {
	m := o.(*kubeflowv1.PyTorchJob).Spec.RunPolicy.ManagedBy
	return m == nil || *m == kubeflowv1.KubeflowJobsController
}

// passTime is the time of a pass: v1 timestamps travel with second
// precision; truncating keeps a status that round-tripped through the API
// server equal to a recomputed one.
func passTime(now time.Time) metav1.Time { return metav1.NewTime(now.Truncate(time.Second)) }

// Plan implements jobframework.Adapter (never called for a finished job,
// nor one past its deadline: jobframework.Lifecycle): nothing for one that
// fails validation; else the plan of Services and JobSet for the defaulted
// job.
func (a Adapter) Plan(o client.Object, _ *observe.Observed, _ time.Time) (*plan.Plan, error) {
	job := o.(*kubeflowv1.PyTorchJob)
	if _, errs := Validate(nil, job); len(errs) > 0 {
		return nil, &framework.InvalidError{Errs: errs}
	}
	return BuildWithGang(a.Framework, Defaulted(job), a.GangScheduler)
}

var _ jobframework.Lifecycle = Adapter{}

// Finished implements jobframework.Lifecycle: Succeeded or Failed, and when.
func (Adapter) Finished(o client.Object) (bool, *metav1.Time) {
	st := &o.(*kubeflowv1.PyTorchJob).Status
	return IsFinished(st), st.CompletionTime
}

// TTLAfterFinished implements jobframework.Lifecycle: runPolicy's (as
// defaulted: an invalid job has one too).
func (Adapter) TTLAfterFinished(o client.Object) *int32 {
	return Defaulted(o.(*kubeflowv1.PyTorchJob)).Spec.RunPolicy.TTLSecondsAfterFinished
}

// Deadline implements jobframework.Lifecycle: activeDeadlineSeconds from
// status.startTime, as v1 counts it (a job that never ran, or was resumed,
// counts from now: startRun); none while suspended, nor for a job that fails
// validation (it fails for that).
func (Adapter) Deadline(o client.Object, now time.Time) (time.Time, bool) {
	job := o.(*kubeflowv1.PyTorchJob)
	if _, errs := Validate(nil, job); len(errs) > 0 {
		return time.Time{}, false // it fails validation first
	}
	d := Defaulted(job)
	suspended := ptr.Deref(d.Spec.RunPolicy.Suspend, false)
	if suspended {
		return time.Time{}, false
	}
	st := job.Status.DeepCopy()
	startRun(st, suspended, passTime(now))
	return deadline(d, st)
}

// startRun sets startTime the way v1 did: a resumed job counts its deadline
// from now; one that never ran from its first unsuspended pass. It reports
// whether the job was resumed in this pass.
func startRun(status *kubeflowv1.JobStatus, suspended bool, now metav1.Time) (resumed bool) {
	if suspended {
		return false
	}
	if IsTrue(status, kubeflowv1.JobSuspended) {
		resumed = true
		status.StartTime = now.DeepCopy()
	}
	if status.StartTime == nil {
		status.StartTime = now.DeepCopy()
	}
	return resumed
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
