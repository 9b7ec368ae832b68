package localcluster

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Only Kueue's TrainJob mutating webhook gets the selector; the others (the
// Job webhook that suspends a queued Job, the validating TrainJob webhook)
// see every object, as Kueue registers them.
func TestOnlyQueuedTrainJobs(t *testing.T) {
	hook := func(name string) interface{} { return map[string]interface{}{"name": name} }
	mutating := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
		"metadata": map[string]interface{}{"name": "kueue-mutating-webhook-configuration"},
		"webhooks": []interface{}{hook("mjob.kb.io"), hook(KueueTrainJobWebhook)},
	}}
	validating := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
		"metadata": map[string]interface{}{"name": "kueue-validating-webhook-configuration"},
		"webhooks": []interface{}{hook("vtrainjob.kb.io")},
	}}
	if err := onlyQueuedTrainJobs([]*unstructured.Unstructured{mutating, validating}); err != nil {
		t.Fatal(err)
	}
	want := []interface{}{
		hook("mjob.kb.io"),
		map[string]interface{}{"name": KueueTrainJobWebhook, "objectSelector": map[string]interface{}{
			"matchExpressions": []interface{}{map[string]interface{}{"key": "kueue.x-k8s.io/queue-name", "operator": "Exists"}}}},
	}
	if diff := cmp.Diff(want, mutating.Object["webhooks"]); diff != "" {
		t.Errorf("mutating webhooks (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]interface{}{hook("vtrainjob.kb.io")}, validating.Object["webhooks"]); diff != "" {
		t.Errorf("validating webhooks changed (-want +got):\n%s", diff)
	}
	if err := onlyQueuedTrainJobs([]*unstructured.Unstructured{validating}); err == nil {
		t.Error("no error for webhooks without Kueue's TrainJob webhook (a Kueue that renamed it)")
	}
}
