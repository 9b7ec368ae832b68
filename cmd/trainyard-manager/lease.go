package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// leaderElectionID names the Lease the replicas elect their leader with.
const leaderElectionID = "trainyard.trainer.kubeflow.org"

// The manager creates its leader-election Lease itself, so nothing that
// installs Trainyard owns it, and uninstalling (helm uninstall, kubectl
// delete -k) would leave it behind. The leader therefore makes the webhook
// Service, which every install creates in the manager's namespace, the
// Lease's owner: the garbage collector deletes the Lease with it. The manager
// cannot delete the Lease on its way out instead: an uninstall deletes its
// RBAC and ServiceAccount at the same time as its pods.

// addLeaseOwner adds to mgr, as a runnable of the leader (so the Lease
// exists), the step that gives the Lease in namespace ns the Service
// service as its owner; none when the two are in different namespaces.
func addLeaseOwner(mgr ctrl.Manager, leaseNS string, service types.NamespacedName) error {
	if leaseNS == "" || leaseNS != service.Namespace {
		return nil
	}
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		log := ctrl.Log.WithName("leader-election")
		var last error
		// Until it holds: the API server may be briefly unavailable.
		_ = wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(ctx context.Context) (bool, error) {
			err := ownLease(ctx, mgr.GetAPIReader(), mgr.GetClient(), client.ObjectKey{Namespace: leaseNS, Name: leaderElectionID}, service)
			if errors.Is(err, errNoService) {
				log.Info("no webhook Service to own the leader-election Lease (a manager outside the cluster)", "service", service)
				return true, nil
			}
			if err != nil && (last == nil || err.Error() != last.Error()) {
				log.Error(err, "making the webhook Service the Lease's owner; retrying")
			}
			last = err
			return err == nil, nil
		})
		return nil
	}))
}

// errNoService: the manager runs without its Service (outside a cluster).
var errNoService = errors.New("no such Service")

// ownLease adds the Service as an owner of the Lease, unless it is one
// already. The patch carries the Lease's resourceVersion, so that it never
// overwrites a renewal it did not see.
func ownLease(ctx context.Context, r client.Reader, w client.Writer, lease, service types.NamespacedName) error {
	var svc corev1.Service
	if err := r.Get(ctx, service, &svc); apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: %s", errNoService, service)
	} else if err != nil {
		return fmt.Errorf("reading Service %s: %w", service, err)
	}
	var l coordinationv1.Lease
	if err := r.Get(ctx, lease, &l); err != nil {
		return fmt.Errorf("reading Lease %s: %w", lease, err)
	}
	if slices.ContainsFunc(l.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == svc.UID }) {
		return nil
	}
	orig := l.DeepCopy()
	l.OwnerReferences = append(l.OwnerReferences, metav1.OwnerReference{
		APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID})
	if err := w.Patch(ctx, &l, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("patching Lease %s: %w", lease, err)
	}
	return nil
}

// leaseNamespace is the namespace of the Lease: --leader-election-namespace,
// else the pod's (controller-runtime's default); "" when neither is known.
func leaseNamespace(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
