// Package trainjob plugs TrainJobs into the generic reconciler
// (pkg/controller/jobframework): a TrainJob resolves to its runtime (the
// snapshot kept on its JobSet, else the live TrainingRuntime or
// ClusterTrainingRuntime) and the runtime plugins; its status follows, purely,
// from what was observed of its children, pods and Kueue Workloads.
package trainjob

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
	"github.com/trainyard/trainyard/pkg/observe"
	"github.com/trainyard/trainyard/pkg/plan"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
	"github.com/trainyard/trainyard/pkg/validation"
)

// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainjobs,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainjobs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainjobs/finalizers,verbs=update
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainingruntimes;clustertrainingruntimes,verbs=get;list;watch

// Adapter is the TrainJob kind.
type Adapter struct {
	Framework *framework.Framework
	// Metrics are the manager's TrainJob metrics (nil: none recorded).
	Metrics *Metrics

	// gone remembers JobSets that finished, for the moment between their
	// finish (or deletion) and the TrainJob's status saying so (nil: none).
	gone *finishedJobSets
}

var _ jobframework.Adapter = (*Adapter)(nil)

// Kind implements jobframework.Adapter.
func (*Adapter) Kind() string { return trainer.TrainJobKind }

// New implements jobframework.Adapter.
func (*Adapter) New() client.Object { return &trainer.TrainJob{} }

// Ours implements jobframework.Adapter: a TrainJob managed by another
// controller (MultiKueue) is left alone.
func (*Adapter) Ours(o client.Object) bool {
	m := o.(*trainer.TrainJob).Spec.ManagedBy
	return m == nil || *m == trainer.TrainJobControllerName
}

// inputs are what a TrainJob's plan reads besides the job and its children,
// read while observing (ReadInputs).
type inputs struct {
	// rt is the runtime: the snapshot on the job's JobSet, else the live one.
	rt *runtime.Runtime
	// err is why there is none (not found, unsupported, a failed read).
	err error
	// lookups are the field errors of the checks that need lookups
	// (validation.ValidateLookups), made before the job's first JobSet.
	lookups field.ErrorList
	// gone is the last state of the job's JobSet when that JobSet finished
	// and is not observed any more (deleted): the job finished, and gets no
	// new one (finishedJobSets).
	gone *jobsetv1alpha2.JobSet
}

var _ jobframework.InputReader = (*Adapter)(nil)

// ReadInputs implements jobframework.InputReader: the job's runtime and,
// before its first JobSet, the checks the webhook makes with lookups, so that
// their errors show in status when the webhook is not installed. A finished
// job needs neither.
func (a *Adapter) ReadInputs(ctx context.Context, r client.Reader, o client.Object, obs *observe.Observed) error {
	job := o.(*trainer.TrainJob)
	if finished(&job.Status) {
		a.gone.forget(job.UID)
		return nil
	}
	in := &inputs{}
	if obs.JobSet(job.Name) == nil {
		if in.gone = a.gone.get(job.UID); in.gone != nil {
			obs.Inputs = in // finished: no runtime needed
			return nil
		}
	}
	in.rt, in.err = runtimeFor(ctx, r, job, obs)
	if in.err == nil && obs.JobSet(job.Name) == nil {
		in.lookups = validation.ValidateLookups(ctx, r, runtime.TrainJobRequest(job), in.rt)
	}
	obs.Inputs = in
	return nil
}

// Plan implements jobframework.Adapter (never called for a finished job,
// nor one past its deadline: jobframework.Lifecycle). A job whose JobSet
// finished and went before its status said so gets no plan either: it never
// gets a new JobSet.
func (a *Adapter) Plan(o client.Object, obs *observe.Observed, _ time.Time) (*plan.Plan, error) {
	job := o.(*trainer.TrainJob)
	in, ok := obs.Inputs.(*inputs)
	if !ok {
		return nil, errors.New("the TrainJob's runtime was not read: ReadInputs comes first")
	}
	if in.gone != nil {
		return nil, nil // its JobSet finished and went: Failed and Complete are terminal
	}
	if in.err != nil {
		return nil, in.err
	}
	p, err := a.Render(job, in.rt)
	if err != nil || obs.JobSet(job.Name) != nil {
		return p, err
	}
	if len(in.lookups) > 0 {
		return nil, &framework.InvalidError{Errs: in.lookups, Recheck: true}
	}
	return p, nil
}

// runtimeFor is the snapshot on the job's JobSet, else the live runtime (also
// for a JobSet without a readable snapshot: made by an older version).
func runtimeFor(ctx context.Context, r client.Reader, job *trainer.TrainJob, obs *observe.Observed) (*runtime.Runtime, error) {
	if js := obs.JobSet(job.Name); js != nil {
		if s, ok := js.Annotations[SnapshotAnnotation]; ok {
			if rt, err := runtime.DecodeRuntime(s); err == nil {
				return rt, nil
			}
		}
	}
	return runtime.Resolve(ctx, r, job)
}

// Render runs the pipeline and returns the plan, its JobSet annotated with the
// runtime snapshot, so that later edits of the runtime never change the job.
func (a *Adapter) Render(job *trainer.TrainJob, rt *runtime.Runtime) (*plan.Plan, error) {
	// The admission webhook runs these checks too; running them here reports
	// bad input in status when the webhook is not installed.
	if errs := validation.ValidateTrainJob(nil, job); len(errs) > 0 {
		return nil, &framework.InvalidError{Errs: errs}
	}
	p, err := a.Framework.Build(runtime.TrainJobRequest(job), rt)
	if err != nil {
		return nil, err
	}
	if js := p.JobSet(); js != nil {
		snap, err := rt.Encode()
		if err != nil {
			return nil, err
		}
		if js.Annotations == nil {
			js.Annotations = map[string]string{}
		}
		js.Annotations[SnapshotAnnotation] = snap
	}
	return p, nil
}
