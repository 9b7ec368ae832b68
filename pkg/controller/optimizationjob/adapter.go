package optimizationjob

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/childsync"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
	"github.com/trainyard/trainyard/pkg/observe"
	"github.com/trainyard/trainyard/pkg/plan"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
)

// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=optimizationjobs,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=optimizationjobs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=optimizationjobs/finalizers,verbs=update
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainjobs,verbs=get;list;watch;create;delete

// Event reasons.
const (
	EventTrialCreated   = "TrialCreated"
	EventTrialSucceeded = "TrialSucceeded"
	EventTrialFailed    = "TrialFailed"
	EventBestTrial      = "BestTrialChanged"
	EventCompleted      = "Completed"
	EventFailed         = "Failed"
	EventInvalid        = "InvalidSpec"
)

// Adapter is the OptimizationJob kind (jobframework.Adapter).
type Adapter struct {
	// Metrics are the manager's OptimizationJob metrics (nil: none).
	Metrics *Metrics
}

var (
	_ jobframework.Adapter     = Adapter{}
	_ jobframework.Lifecycle   = Adapter{}
	_ jobframework.SyncEventer = Adapter{}
	_ jobframework.Recorder    = Adapter{}
)

// Kind implements jobframework.Adapter.
func (Adapter) Kind() string { return trainer.OptimizationJobKind }

// New implements jobframework.Adapter.
func (Adapter) New() client.Object { return &trainer.OptimizationJob{} }

// Ours implements jobframework.Adapter: the API has no managedBy, every
// OptimizationJob is Trainyard's.
func (Adapter) Ours(client.Object) bool { return true }

// Plan implements jobframework.Adapter (never called for a finished job):
// the next trials, lowest index first, so that at most parallelTrials are
// unfinished; a trial index once made (a TrainJob observed, or a record in
// status) is never made again, so a deleted trial is not run twice. Invalid
// input is a *framework.InvalidError.
func (Adapter) Plan(o client.Object, obs *observe.Observed, _ time.Time) (*plan.Plan, error) {
	job := o.(*trainer.OptimizationJob)
	spec, s, errs := Prepare(job)
	if len(errs) > 0 {
		return nil, &framework.InvalidError{Errs: errs}
	}
	recs := records(job, obs, s.Trials())
	running := 0
	for _, r := range recs {
		if r.State == trainer.TrialRunning {
			running++
		}
	}
	j := job.DeepCopy()
	j.Spec = *spec
	p := &plan.Plan{}
	for i := len(recs); i < s.Trials() && running < int(spec.ParallelTrials); i++ {
		p.Add(plan.CreateOnce(newTrial(j, i, s.Trial(i))))
		running++
	}
	return p, nil
}

// Finished implements jobframework.Lifecycle: Complete or Failed.
func (Adapter) Finished(o client.Object) (bool, *metav1.Time) {
	job := o.(*trainer.OptimizationJob)
	if job.Status == nil {
		return false, nil
	}
	for _, t := range []string{trainer.OptimizationJobComplete, trainer.OptimizationJobFailed} {
		if c := apimeta.FindStatusCondition(job.Status.Conditions, t); c != nil && c.Status == metav1.ConditionTrue {
			return true, &c.LastTransitionTime
		}
	}
	return false, nil
}

// TTLAfterFinished implements jobframework.Lifecycle: the API has none.
func (Adapter) TTLAfterFinished(client.Object) *int32 { return nil }

// Deadline implements jobframework.Lifecycle: the API has none (each trial
// has its TrainJob's activeDeadlineSeconds).
func (Adapter) Deadline(client.Object, time.Time) (time.Time, bool) { return time.Time{}, false }

// SyncEvents implements jobframework.SyncEventer: one event per trial
// created, with its parameters.
func (Adapter) SyncEvents(_ client.Object, sync jobframework.Sync) []jobframework.Event {
	var out []jobframework.Event
	for key, action := range sync.Result.Actions {
		if key.GroupKind != trainJobKind || action != childsync.Created {
			continue
		}
		tj, ok := sync.Result.Children[key].(*trainer.TrainJob)
		if !ok {
			continue
		}
		out = append(out, jobframework.Event{Type: corev1.EventTypeNormal, Reason: EventTrialCreated, Action: "Create",
			Message: fmt.Sprintf("Created trial %s: %s", tj.Name, ParamsText(ParametersOf(tj))), Related: trialRef(tj.Namespace, tj.Name)})
	}
	sortEvents(out)
	return out
}

// ParamsText is "name=value, ..." of a trial's parameters.
func ParamsText(ps []trainer.ParameterAssignment) string {
	kv := make([]string, len(ps))
	for i, p := range ps {
		kv[i] = p.Name + "=" + p.Value
	}
	return strings.Join(kv, ", ")
}
