package trainjob

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
	"github.com/trainyard/trainyard/pkg/validation"
	"github.com/trainyard/trainyard/pkg/webhooks"
)

// +kubebuilder:webhook:path=/mutate-trainer-kubeflow-org-v1alpha1-trainjob,mutating=true,failurePolicy=fail,timeoutSeconds=10,sideEffects=None,groups=trainer.kubeflow.org,resources=trainjobs,verbs=create;update,versions=v1alpha1,name=mtrainjob.trainer.kubeflow.org,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/validate-trainer-kubeflow-org-v1alpha1-trainjob,mutating=false,failurePolicy=fail,timeoutSeconds=10,sideEffects=None,groups=trainer.kubeflow.org,resources=trainjobs,verbs=create;update,versions=v1alpha1,name=vtrainjob.trainer.kubeflow.org,admissionReviewVersions=v1

// Defaulter stamps runtimePatches[].time as Kubeflow Trainer v2.3 does,
// so that a queue (Kueue) or the SDK sees the same times on either controller.
// Patches are matched to the old object by manager:
//   - a new manager's patch keeps a time the client set, else gets now (so
//     every patch on create);
//   - a patch whose content (everything but time) is unchanged gets its old
//     time back, whatever the client sent: a read-modify-write of another
//     patch must not move it;
//   - a patch whose content changed gets now, even when the client sent a
//     time: a read-modify-write sends the old time along, and keeping it would
//     hide the change.
//
// Other defaults come from the CRD schema.
type Defaulter struct {
	Clock clock.PassiveClock
}

var _ admission.Defaulter[*trainer.TrainJob] = (*Defaulter)(nil)

// Default implements admission.Defaulter.
func (d *Defaulter) Default(ctx context.Context, job *trainer.TrainJob) error {
	if len(job.Spec.RuntimePatches) == 0 {
		return nil
	}
	old := map[string]trainer.RuntimePatch{}
	if req, err := admission.RequestFromContext(ctx); err == nil && len(req.OldObject.Raw) > 0 {
		var oldJob trainer.TrainJob
		if err := json.Unmarshal(req.OldObject.Raw, &oldJob); err != nil {
			return fmt.Errorf("decoding the old TrainJob %s/%s: %w", job.Namespace, job.Name, err)
		}
		for _, p := range oldJob.Spec.RuntimePatches {
			old[p.Manager] = p
		}
	}
	// metav1.Time travels with second precision; truncating keeps the
	// stamped value equal to what a later read returns.
	now := metav1.NewTime(d.Clock.Now().Truncate(time.Second))
	for i := range job.Spec.RuntimePatches {
		p := &job.Spec.RuntimePatches[i]
		prev, existed := old[p.Manager]
		switch {
		case existed && sameContent(prev, *p):
			p.Time = prev.Time
		case existed, p.Time == nil:
			p.Time = now.DeepCopy()
		}
	}
	return nil
}

// sameContent reports whether two patches differ in nothing but their time.
func sameContent(a, b trainer.RuntimePatch) bool {
	a.Time, b.Time = nil, nil
	return equality.Semantic.DeepEqual(a, b)
}

// Validator rejects TrainJobs that could never run, with the field at fault.
type Validator struct {
	// Client looks up the runtime and what the job names (a PriorityClass).
	// Setup gives it the cache with a live read on a miss (liveOnMiss), so a
	// runtime created just before its job is found.
	Client    client.Reader
	Framework *framework.Framework
}

var _ admission.Validator[*trainer.TrainJob] = (*Validator)(nil)

// ValidateCreate implements admission.Validator.
func (v *Validator) ValidateCreate(ctx context.Context, job *trainer.TrainJob) (admission.Warnings, error) {
	errs := validation.ValidateTrainJob(nil, job)
	if ours(job) {
		errs = append(errs, v.againstRuntime(ctx, job, true)...)
	}
	return nil, webhooks.Invalid(trainerKind(trainer.TrainJobKind), job.Name, errs)
}

// ValidateUpdate implements admission.Validator.
func (v *Validator) ValidateUpdate(ctx context.Context, oldJob, job *trainer.TrainJob) (admission.Warnings, error) {
	if !job.DeletionTimestamp.IsZero() {
		return nil, nil
	}
	errs := validation.ValidateTrainJob(oldJob, job)
	// Only overrides can change after creation; check them against the runtime
	// when they do. A runtime deleted since creation must not block suspending.
	overridesChanged := !equality.Semantic.DeepEqual(oldJob.Spec.PodTemplateOverrides, job.Spec.PodTemplateOverrides) ||
		!equality.Semantic.DeepEqual(oldJob.Spec.RuntimePatches, job.Spec.RuntimePatches)
	if ours(job) && overridesChanged {
		errs = append(errs, v.againstRuntime(ctx, job, false)...)
	}
	return nil, webhooks.Invalid(trainerKind(trainer.TrainJobKind), job.Name, errs)
}

// ValidateDelete implements admission.Validator.
func (v *Validator) ValidateDelete(context.Context, *trainer.TrainJob) (admission.Warnings, error) {
	return nil, nil
}

func (v *Validator) againstRuntime(ctx context.Context, job *trainer.TrainJob, mustExist bool) field.ErrorList {
	ref := field.NewPath("spec", "runtimeRef")
	rt, err := runtime.Resolve(ctx, v.Client, job)
	switch {
	case errors.Is(err, runtime.ErrUnsupported):
		kind := ""
		if job.Spec.RuntimeRef.Kind != nil {
			kind = *job.Spec.RuntimeRef.Kind
		}
		return field.ErrorList{field.NotSupported(ref.Child("kind"), kind,
			[]string{trainer.ClusterTrainingRuntimeKind, trainer.TrainingRuntimeKind})}
	case errors.Is(err, runtime.ErrNotFound):
		if !mustExist {
			return nil
		}
		return field.ErrorList{field.NotFound(ref.Child("name"), job.Spec.RuntimeRef.Name)}
	case err != nil:
		return field.ErrorList{field.InternalError(ref, err)}
	}
	errs := validation.ValidateAgainstRuntime(v.Framework, rt, job)
	if len(errs) > 0 {
		return errs
	}
	// Checks that need a lookup run here, where there is a client (plugins
	// are pure).
	return validation.ValidateLookups(ctx, v.Client, runtime.TrainJobRequest(job), rt)
}

func ours(job *trainer.TrainJob) bool {
	return job.Spec.ManagedBy == nil || *job.Spec.ManagedBy == trainer.TrainJobControllerName
}

// trainerKind is the group and kind of a trainer.kubeflow.org kind.
func trainerKind(kind string) schema.GroupKind {
	return trainer.GroupVersion.WithKind(kind).GroupKind()
}

// setupWebhooks registers the TrainJob webhooks and those of both runtime
// kinds with the manager's webhook server. The validator reads the runtime
// and the PriorityClass from the cache and, on a miss, once from the API
// server, so that a runtime created just before its job is not rejected as
// missing.
func setupWebhooks(mgr ctrl.Manager, fw *framework.Framework) error {
	if err := ctrl.NewWebhookManagedBy(mgr, &trainer.TrainJob{}).
		WithDefaulter(&Defaulter{Clock: clock.RealClock{}}).
		WithValidator(&Validator{Client: webhooks.LiveOnMiss(mgr.GetClient(), mgr.GetAPIReader()), Framework: fw}).
		Complete(); err != nil {
		return fmt.Errorf("TrainJob webhooks: %w", err)
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &trainer.TrainingRuntime{}).WithValidator(TrainingRuntimeValidator{Framework: fw}).Complete(); err != nil {
		return fmt.Errorf("TrainingRuntime webhook: %w", err)
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &trainer.ClusterTrainingRuntime{}).WithValidator(ClusterTrainingRuntimeValidator{Framework: fw}).Complete(); err != nil {
		return fmt.Errorf("ClusterTrainingRuntime webhook: %w", err)
	}
	return nil
}
