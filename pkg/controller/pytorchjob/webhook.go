package pytorchjob

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/webhooks"
)

// The defaulting webhook runs on create only: a job is defaulted once, as
// written, and never changed behind the back of whoever updates it later (the
// user, Kueue starting it). The controller defaults in memory on every pass
// anyway (Defaulted), so an update that drops a default changes nothing.
//
// +kubebuilder:webhook:path=/mutate-kubeflow-org-v1-pytorchjob,mutating=true,failurePolicy=fail,timeoutSeconds=10,sideEffects=None,groups=kubeflow.org,resources=pytorchjobs,verbs=create,versions=v1,name=mpytorchjob.kubeflow.org,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/validate-kubeflow-org-v1-pytorchjob,mutating=false,failurePolicy=fail,timeoutSeconds=10,sideEffects=None,groups=kubeflow.org,resources=pytorchjobs,verbs=create;update,versions=v1,name=vpytorchjob.kubeflow.org,admissionReviewVersions=v1

// Defaulter stores v1's defaults (Default) on a new
// PyTorchJob, so that `kubectl get -o yaml` shows what the job runs with.
//
// A job that fails validation is left as written: the validating webhook,
// which runs after every mutating one, then rejects it for what the user
// wrote. Defaulting first would hide errors v1 reports, such as a Master
// without replicas ("must be 1").
type Defaulter struct{}

var _ admission.Defaulter[*kubeflowv1.PyTorchJob] = Defaulter{}

// Default implements admission.Defaulter.
func (Defaulter) Default(_ context.Context, job *kubeflowv1.PyTorchJob) error {
	if _, errs := Validate(nil, job); len(errs) > 0 {
		return nil
	}
	Default(job)
	return nil
}

// Validator rejects PyTorchJobs with training-operator v1.9's rules
// (Validate), the very checks the controller runs, which puts the same
// field errors in the job's status when webhooks are off. Deprecated fields,
// and fields Trainyard accepts but ignores (Ignored: the HPA metrics of
// spec.elasticPolicy.metrics), come back as admission warnings, which kubectl
// prints.
type Validator struct{}

var _ admission.Validator[*kubeflowv1.PyTorchJob] = Validator{}

// ValidateCreate implements admission.Validator.
func (Validator) ValidateCreate(_ context.Context, job *kubeflowv1.PyTorchJob) (admission.Warnings, error) {
	warnings, errs := Validate(nil, job)
	warnings = append(warnings, Ignored(job)...)
	return warnings, webhooks.Invalid(kubeflowv1.GroupVersion.WithKind(kubeflowv1.PyTorchJobKind).GroupKind(), job.Name, errs)
}

// ValidateUpdate implements admission.Validator. An update that leaves the
// spec alone (labels, finalizers, a deletion) is never rejected: a job stored
// while webhooks were off may be invalid, and must still be labelled, released
// or deleted; the controller has already marked it Failed.
func (Validator) ValidateUpdate(_ context.Context, oldJob, job *kubeflowv1.PyTorchJob) (admission.Warnings, error) {
	warnings, errs := Validate(oldJob, job)
	warnings = append(warnings, Ignored(job)...)
	if !job.DeletionTimestamp.IsZero() || equality.Semantic.DeepEqual(oldJob.Spec, job.Spec) {
		return warnings, nil
	}
	return warnings, webhooks.Invalid(kubeflowv1.GroupVersion.WithKind(kubeflowv1.PyTorchJobKind).GroupKind(), job.Name, errs)
}

// ValidateDelete implements admission.Validator.
func (Validator) ValidateDelete(context.Context, *kubeflowv1.PyTorchJob) (admission.Warnings, error) {
	return nil, nil
}

// setupWebhooks registers the PyTorchJob webhooks, only when the cluster
// serves pytorchjobs.kubeflow.org, as the controller is; the manager's scheme
// must then include kubeflow.org/v1.
func setupWebhooks(mgr ctrl.Manager) error {
	served, err := Served(mgr.GetRESTMapper())
	if err != nil {
		return err
	}
	if !served {
		mgr.GetLogger().WithName("setup").Info("PyTorchJob webhooks not registered: the pytorchjobs.kubeflow.org CRD is not installed")
		return nil
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &kubeflowv1.PyTorchJob{}).
		WithDefaulter(Defaulter{}).
		WithValidator(Validator{}).
		Complete(); err != nil {
		return fmt.Errorf("PyTorchJob webhooks: %w", err)
	}
	return nil
}
