package optimizationjob

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/webhooks"
)

// +kubebuilder:webhook:path=/validate-trainer-kubeflow-org-v1alpha1-optimizationjob,mutating=false,failurePolicy=fail,timeoutSeconds=10,sideEffects=None,groups=trainer.kubeflow.org,resources=optimizationjobs,verbs=create;update,versions=v1alpha1,name=voptimizationjob.trainer.kubeflow.org,admissionReviewVersions=v1

// Validator rejects OptimizationJobs with the checks the controller runs
// (Prepare), which put the same field errors in the job's status when
// webhooks are off, and any change of the spec (immutable, as the API
// server's rule says too).
type Validator struct{}

var _ admission.Validator[*trainer.OptimizationJob] = Validator{}

func invalid(job *trainer.OptimizationJob, errs field.ErrorList) error {
	return webhooks.Invalid(trainer.GroupVersion.WithKind(trainer.OptimizationJobKind).GroupKind(), job.Name, errs)
}

// ValidateCreate implements admission.Validator.
func (Validator) ValidateCreate(_ context.Context, job *trainer.OptimizationJob) (admission.Warnings, error) {
	_, _, errs := Prepare(job)
	return nil, invalid(job, errs)
}

// ValidateUpdate implements admission.Validator: the spec may not change;
// an update that leaves it alone (labels, finalizers, a deletion) is never
// rejected, even for a job stored invalid while webhooks were off.
func (Validator) ValidateUpdate(_ context.Context, oldJob, job *trainer.OptimizationJob) (admission.Warnings, error) {
	if equality.Semantic.DeepEqual(oldJob.Spec, job.Spec) || !job.DeletionTimestamp.IsZero() {
		return nil, nil
	}
	return nil, invalid(job, field.ErrorList{field.Forbidden(field.NewPath("spec"), "OptimizationJobSpec is immutable and cannot be updated after creation")})
}

// ValidateDelete implements admission.Validator.
func (Validator) ValidateDelete(context.Context, *trainer.OptimizationJob) (admission.Warnings, error) {
	return nil, nil
}

// setupWebhooks registers the OptimizationJob webhook.
func setupWebhooks(mgr ctrl.Manager) error {
	if err := ctrl.NewWebhookManagedBy(mgr, &trainer.OptimizationJob{}).WithValidator(Validator{}).Complete(); err != nil {
		return fmt.Errorf("OptimizationJob webhook: %w", err)
	}
	return nil
}
