package webhooks

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	legacy "github.com/trainyard/trainyard/pkg/legacy/pytorchjob"
)

// The defaulting webhook runs on create only: a job is defaulted once, as
// written, and never changed behind the back of whoever updates it later (the
// user, Kueue starting it). The controller defaults in memory on every pass
// anyway (legacy.Defaulted), so an update that drops a default changes nothing.
//
// +kubebuilder:webhook:path=/mutate-kubeflow-org-v1-pytorchjob,mutating=true,failurePolicy=fail,timeoutSeconds=10,sideEffects=None,groups=kubeflow.org,resources=pytorchjobs,verbs=create,versions=v1,name=mpytorchjob.kubeflow.org,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/validate-kubeflow-org-v1-pytorchjob,mutating=false,failurePolicy=fail,timeoutSeconds=10,sideEffects=None,groups=kubeflow.org,resources=pytorchjobs,verbs=create;update,versions=v1,name=vpytorchjob.kubeflow.org,admissionReviewVersions=v1

// PyTorchJobDefaulter stores v1's defaults (legacy.Default) on a new
// PyTorchJob, so that `kubectl get -o yaml` shows what the job runs with.
//
// A job that fails validation is left as written: the validating webhook,
// which runs after every mutating one, then rejects it for what the user
// wrote. Defaulting first would hide errors v1 reports, such as a Master
// without replicas ("must be 1").
type PyTorchJobDefaulter struct{}

var _ admission.Defaulter[*kubeflowv1.PyTorchJob] = PyTorchJobDefaulter{}

// Default implements admission.Defaulter.
func (PyTorchJobDefaulter) Default(_ context.Context, job *kubeflowv1.PyTorchJob) error {
	if _, errs := legacy.Validate(nil, job); len(errs) > 0 {
		return nil
	}
	legacy.Default(job)
	return nil
}

// PyTorchJobValidator rejects PyTorchJobs with training-operator v1.9's rules
// (legacy.Validate), the very checks the controller runs, which puts the same
// field errors in the job's status when webhooks are off. Deprecated fields,
// and fields Trainyard accepts but ignores (legacy.Ignored: the HPA metrics of
// spec.elasticPolicy.metrics), come back as admission warnings, which kubectl
// prints.
type PyTorchJobValidator struct{}

var _ admission.Validator[*kubeflowv1.PyTorchJob] = PyTorchJobValidator{}

// ValidateCreate implements admission.Validator.
func (PyTorchJobValidator) ValidateCreate(_ context.Context, job *kubeflowv1.PyTorchJob) (admission.Warnings, error) {
	warnings, errs := legacy.Validate(nil, job)
	warnings = append(warnings, legacy.Ignored(job)...)
	return warnings, invalid(kubeflowv1.GroupVersion.WithKind(kubeflowv1.PyTorchJobKind).GroupKind(), job.Name, errs)
}

// ValidateUpdate implements admission.Validator. An update that leaves the
// spec alone (labels, finalizers, a deletion) is never rejected: a job stored
// while webhooks were off may be invalid, and must still be labelled, released
// or deleted; the controller has already marked it Failed.
func (PyTorchJobValidator) ValidateUpdate(_ context.Context, oldJob, job *kubeflowv1.PyTorchJob) (admission.Warnings, error) {
	warnings, errs := legacy.Validate(oldJob, job)
	warnings = append(warnings, legacy.Ignored(job)...)
	if !job.DeletionTimestamp.IsZero() || equality.Semantic.DeepEqual(oldJob.Spec, job.Spec) {
		return warnings, nil
	}
	return warnings, invalid(kubeflowv1.GroupVersion.WithKind(kubeflowv1.PyTorchJobKind).GroupKind(), job.Name, errs)
}

// ValidateDelete implements admission.Validator.
func (PyTorchJobValidator) ValidateDelete(context.Context, *kubeflowv1.PyTorchJob) (admission.Warnings, error) {
	return nil, nil
}
