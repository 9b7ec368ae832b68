package main

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestOwnLease: the webhook Service becomes the Lease's owner once, next to
// any other owner; without the Service nothing changes. (That the garbage
// collector then deletes the Lease on uninstall is test/deployed_e2e's
// TestHelmUninstallLeavesNothing, on a real cluster.)
func TestOwnLease(t *testing.T) {
	const ns = "trainyard-system"
	svcKey := types.NamespacedName{Namespace: ns, Name: "trainyard-webhook"}
	leaseKey := types.NamespacedName{Namespace: ns, Name: leaderElectionID}
	other := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "other"}
	for _, tc := range []struct {
		name    string
		service bool
		owners  []metav1.OwnerReference
		want    []metav1.OwnerReference
		wantErr error
	}{
		{name: "no owner yet", service: true,
			want: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "trainyard-webhook", UID: "svc-uid"}}},
		{name: "another owner kept", service: true, owners: []metav1.OwnerReference{other},
			want: []metav1.OwnerReference{other, {APIVersion: "v1", Kind: "Service", Name: "trainyard-webhook", UID: "svc-uid"}}},
		{name: "already owned", service: true,
			owners: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "trainyard-webhook", UID: "svc-uid"}},
			want:   []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "trainyard-webhook", UID: "svc-uid"}}},
		{name: "no Service", wantErr: errNoService},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := []client.Object{&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
				Name: leaseKey.Name, Namespace: ns, OwnerReferences: tc.owners}}}
			if tc.service {
				objs = append(objs, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: svcKey.Name, Namespace: ns, UID: "svc-uid"}})
			}
			c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(objs...).Build()
			ctx := context.Background()
			if err := ownLease(ctx, c, c, leaseKey, svcKey); !errors.Is(err, tc.wantErr) {
				t.Fatalf("ownLease: %v, want %v", err, tc.wantErr)
			}
			var got coordinationv1.Lease
			if err := c.Get(ctx, leaseKey, &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got.OwnerReferences); diff != "" {
				t.Errorf("owners (-want +got):\n%s", diff)
			}
		})
	}
}
