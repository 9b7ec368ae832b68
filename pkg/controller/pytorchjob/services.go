package pytorchjob

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	legacy "github.com/trainyard/trainyard/pkg/legacy/pytorchjob"
)

// ensureServices creates the job's Services that do not exist yet, owned by
// the job (so they go with it). Existing ones are left as they are. Services
// are not cached by the manager (that would cache every Service of the
// cluster), so this creates and treats AlreadyExists as done; it runs only
// while no JobSet runs, which is rare.
func (r *Reconciler) ensureServices(ctx context.Context, job *kubeflowv1.PyTorchJob, svcs []*corev1.Service) error {
	for _, svc := range svcs {
		svc = svc.DeepCopy()
		if err := controllerutil.SetControllerReference(job, svc, r.Scheme()); err != nil {
			return fmt.Errorf("setting owner of Service %s: %w", svc.Name, err)
		}
		if err := r.Create(ctx, svc, client.FieldOwner(FieldOwner)); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating Service %s: %w", svc.Name, err)
		}
	}
	return nil
}

// deleteServices deletes the job's Services (found by the job's labels,
// uncached).
func (r *Reconciler) deleteServices(ctx context.Context, job *kubeflowv1.PyTorchJob) error {
	var list corev1.ServiceList
	if err := r.APIReader.List(ctx, &list, client.InNamespace(job.Namespace), client.MatchingLabels(legacy.SelectorLabels(job.Name))); err != nil {
		return fmt.Errorf("listing Services of PyTorchJob %s: %w", job.Name, err)
	}
	for i := range list.Items {
		svc := &list.Items[i]
		if svc.DeletionTimestamp != nil || !ownedBy(svc, job) {
			continue
		}
		if err := r.Delete(ctx, svc, client.Preconditions{UID: &svc.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting Service %s: %w", svc.Name, err)
		}
	}
	return nil
}

func ownedBy(svc *corev1.Service, job *kubeflowv1.PyTorchJob) bool {
	for _, ref := range svc.OwnerReferences {
		if ref.Controller != nil && *ref.Controller && ref.UID == job.UID {
			return true
		}
	}
	return false
}
