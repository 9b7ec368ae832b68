package framework

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Eventually retries fn every Interval until it returns nil, failing the test
// with fn's last error after Timeout.
func Eventually(t testing.TB, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s: %v", Timeout, err)
		}
		time.Sleep(Interval)
	}
}

// Consistently fails the test if fn returns an error at any time during d.
func Consistently(t testing.TB, d time.Duration, fn func() error) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(Interval) {
		if err := fn(); err != nil {
			t.Fatalf("condition broken: %v", err)
		}
	}
}

// NewNamespace creates a namespace named prefix-<random> for one test and
// deletes it when the test ends.
func NewNamespace(t testing.TB, c client.Client, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), ns) })
	return ns.Name
}

// WaitEvent waits until ns has an event with reason about the object name.
func WaitEvent(t testing.TB, c client.Client, ns, name, reason string) {
	t.Helper()
	Eventually(t, func() error {
		var list eventsv1.EventList
		if err := c.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.Name == name && e.Reason == reason {
				return nil
			}
		}
		return fmt.Errorf("no event %s for %s", reason, name)
	})
}
