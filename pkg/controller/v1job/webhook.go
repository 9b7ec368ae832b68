package v1job

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/webhooks"
)

// Defaulter stores v1's defaults (Def.ApplyDefaults) on a new job, so that
// `kubectl get -o yaml` shows what it runs with. A job that fails validation
// is left as written: the validating webhook then rejects it for what the
// user wrote. The defaulting webhook runs on create only (the controller
// defaults in memory on every pass anyway).
type Defaulter[T Job] struct{ Def *Def }

// Default implements admission.Defaulter.
func (x Defaulter[T]) Default(_ context.Context, job T) error {
	if errs := x.Def.Validate(nil, job); len(errs) > 0 {
		return nil
	}
	x.Def.ApplyDefaults(job)
	return nil
}

// Validator rejects jobs with v1's rules (Def.Validate): the very checks the
// controller runs, which put the same field errors in the job's status when
// webhooks are off.
type Validator[T Job] struct{ Def *Def }

func (x Validator[T]) gk() schema.GroupKind {
	return kubeflowv1.GroupVersion.WithKind(x.Def.Kind).GroupKind()
}

// ValidateCreate implements admission.Validator.
func (x Validator[T]) ValidateCreate(_ context.Context, job T) (admission.Warnings, error) {
	return nil, webhooks.Invalid(x.gk(), job.GetName(), x.Def.Validate(nil, job))
}

// ValidateUpdate implements admission.Validator. An update that leaves the
// spec alone (labels, finalizers, Kueue's, a deletion) is never rejected: a
// job stored while webhooks were off may be invalid and must still be
// labelled, released or deleted; the controller has marked it Failed.
func (x Validator[T]) ValidateUpdate(_ context.Context, oldJob, job T) (admission.Warnings, error) {
	errs := x.Def.Validate(oldJob, job)
	if !job.GetDeletionTimestamp().IsZero() || equality.Semantic.DeepEqual(stripMeta(oldJob), stripMeta(job)) {
		return nil, nil
	}
	return nil, webhooks.Invalid(x.gk(), job.GetName(), errs)
}

// stripMeta is the job without metadata and status: its spec, whatever the
// kind calls it.
func stripMeta(job Job) any {
	c := job.DeepCopyObject().(Job)
	c.SetLabels(nil)
	c.SetAnnotations(nil)
	c.SetFinalizers(nil)
	c.SetResourceVersion("")
	c.SetManagedFields(nil)
	c.SetGeneration(0)
	c.SetOwnerReferences(nil)
	c.SetDeletionTimestamp(nil)
	*c.JobStatus() = kubeflowv1.JobStatus{}
	return c
}

// ValidateDelete implements admission.Validator.
func (Validator[T]) ValidateDelete(context.Context, T) (admission.Warnings, error) { return nil, nil }

// Served reports whether the cluster serves the kind (its CRD is installed).
func (d *Def) Served(mapper meta.RESTMapper) (bool, error) {
	gk := schema.GroupKind{Group: kubeflowv1.GroupVersion.Group, Kind: d.Kind}
	if _, err := mapper.RESTMapping(gk, kubeflowv1.GroupVersion.Version); err != nil {
		if meta.IsNoMatchError(err) {
			return false, nil
		}
		return false, fmt.Errorf("looking up the %s API: %w", d.Kind, err)
	}
	return true, nil
}

// SetupWebhooks registers a kind's defaulting and validating webhooks (obj
// is an empty job of the kind), only when the cluster serves the kind.
func SetupWebhooks[T Job](mgr ctrl.Manager, d *Def, obj T) error {
	served, err := d.Served(mgr.GetRESTMapper())
	if err != nil {
		return err
	}
	if !served {
		mgr.GetLogger().WithName("setup").Info(d.Kind+" webhooks not registered: its CRD is not installed", "crd", d.Resource+"."+kubeflowv1.GroupVersion.Group)
		return nil
	}
	if err := ctrl.NewWebhookManagedBy(mgr, obj).
		WithDefaulter(Defaulter[T]{Def: d}).
		WithValidator(Validator[T]{Def: d}).
		Complete(); err != nil {
		return fmt.Errorf("%s webhooks: %w", d.Kind, err)
	}
	return nil
}
