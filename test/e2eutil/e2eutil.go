// Package e2eutil holds the helpers every end-to-end suite on a local cluster
// needs (test/e2e, test/gang_e2e/...): waiting for a condition, and a fresh
// namespace to run in.
package e2eutil

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// WaitFor retries fn every 250 ms until it returns nil, and fails t with fn's
// last error after timeout.
func WaitFor(t testing.TB, timeout time.Duration, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not met within %s: %v", timeout, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// NewNamespace creates a namespace named prefix plus a random suffix, waits
// (up to timeout) until its default ServiceAccount exists, so that pods can be
// created in it, and deletes it when the test ends.
func NewNamespace(t testing.TB, cli client.Client, prefix string, timeout time.Duration) string {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}
	if err := cli.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Delete(ctx, ns) })
	WaitFor(t, timeout, func() error {
		return cli.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "default"}, &corev1.ServiceAccount{})
	})
	return ns.Name
}
