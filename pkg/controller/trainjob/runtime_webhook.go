package trainjob

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
	"github.com/trainyard/trainyard/pkg/validation"
	"github.com/trainyard/trainyard/pkg/webhooks"
)

// +kubebuilder:webhook:path=/validate-trainer-kubeflow-org-v1alpha1-trainingruntime,mutating=false,failurePolicy=fail,timeoutSeconds=10,sideEffects=None,groups=trainer.kubeflow.org,resources=trainingruntimes,verbs=create;update,versions=v1alpha1,name=vtrainingruntime.trainer.kubeflow.org,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/validate-trainer-kubeflow-org-v1alpha1-clustertrainingruntime,mutating=false,failurePolicy=fail,timeoutSeconds=10,sideEffects=None,groups=trainer.kubeflow.org,resources=clustertrainingruntimes,verbs=create;update,versions=v1alpha1,name=vclustertrainingruntime.trainer.kubeflow.org,admissionReviewVersions=v1

// TrainingRuntimeValidator validates namespaced runtimes. It warns about ML
// policies that no plugin of Framework runs.
type TrainingRuntimeValidator struct {
	Framework *framework.Framework
}

var _ admission.Validator[*trainer.TrainingRuntime] = TrainingRuntimeValidator{}

// ValidateCreate implements admission.Validator.
func (v TrainingRuntimeValidator) ValidateCreate(_ context.Context, rt *trainer.TrainingRuntime) (admission.Warnings, error) {
	w, errs := validation.ValidateRuntimeSpec(v.Framework, &rt.Spec)
	return w, webhooks.Invalid(trainerKind(trainer.TrainingRuntimeKind), rt.Name, errs)
}

// ValidateUpdate implements admission.Validator. Running TrainJobs keep their
// snapshot, so an update is held to the same rules as a create.
func (v TrainingRuntimeValidator) ValidateUpdate(ctx context.Context, _, rt *trainer.TrainingRuntime) (admission.Warnings, error) {
	return v.ValidateCreate(ctx, rt)
}

// ValidateDelete implements admission.Validator.
func (TrainingRuntimeValidator) ValidateDelete(context.Context, *trainer.TrainingRuntime) (admission.Warnings, error) {
	return nil, nil
}

// ClusterTrainingRuntimeValidator validates cluster-scoped runtimes.
type ClusterTrainingRuntimeValidator struct {
	Framework *framework.Framework
}

var _ admission.Validator[*trainer.ClusterTrainingRuntime] = ClusterTrainingRuntimeValidator{}

// ValidateCreate implements admission.Validator.
func (v ClusterTrainingRuntimeValidator) ValidateCreate(_ context.Context, rt *trainer.ClusterTrainingRuntime) (admission.Warnings, error) {
	w, errs := validation.ValidateRuntimeSpec(v.Framework, &rt.Spec)
	return w, webhooks.Invalid(trainerKind(trainer.ClusterTrainingRuntimeKind), rt.Name, errs)
}

// ValidateUpdate implements admission.Validator.
func (v ClusterTrainingRuntimeValidator) ValidateUpdate(ctx context.Context, _, rt *trainer.ClusterTrainingRuntime) (admission.Warnings, error) {
	return v.ValidateCreate(ctx, rt)
}

// ValidateDelete implements admission.Validator.
func (ClusterTrainingRuntimeValidator) ValidateDelete(context.Context, *trainer.ClusterTrainingRuntime) (admission.Warnings, error) {
	return nil, nil
}
