package localcluster

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// KueueTrainJobWebhook is Kueue's mutating webhook for TrainJobs.
const KueueTrainJobWebhook = "mtrainjob.kb.io"

// KueueQueueLabel names the LocalQueue a job is submitted to.
const KueueQueueLabel = "kueue.x-k8s.io/queue-name"

// onlyQueuedTrainJobs gives Kueue's TrainJob mutating webhook an object
// selector, so that it sees only TrainJobs submitted to a queue.
//
// Kueue v0.17's webhook (Default in pkg/controller/jobs/trainjob) appends a
// runtime patch of manager kueue.x-k8s.io/manager, with an empty spec, to
// every TrainJob it is called for on create, queue label or not; its manifests
// give it no selector, so every TrainJob of the cluster gets one. That is
// Kueue's behaviour, not a configuration of this cluster: users of Kubeflow
// Trainer v2.4 with Kueue 0.17 see the same third patch (Kueue's later fix,
// #15213, only stops it from being added twice). A TrainJob that is not
// submitted to Kueue must not be changed by it, so the local cluster
// registers the webhook for labelled TrainJobs only (docs/local-cluster.md;
// docs/compatibility.md has the same patch for a real cluster). Kueue runs
// with manageJobsWithoutQueueName false here, so it manages no unlabelled
// TrainJob anyway; what the selector gives up is Kueue's defaulting of a
// namespace's "default" LocalQueue onto unlabelled TrainJobs.
func onlyQueuedTrainJobs(objs []*unstructured.Unstructured) error {
	found := false
	for _, u := range objs {
		if u.GetKind() != "MutatingWebhookConfiguration" {
			continue
		}
		hooks, _, err := unstructured.NestedSlice(u.Object, "webhooks")
		if err != nil {
			return fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
		}
		for i, h := range hooks {
			hm, ok := h.(map[string]interface{})
			if !ok || hm["name"] != KueueTrainJobWebhook {
				continue
			}
			hm["objectSelector"] = map[string]interface{}{
				"matchExpressions": []interface{}{map[string]interface{}{"key": KueueQueueLabel, "operator": "Exists"}},
			}
			hooks[i], found = hm, true
		}
		if err := unstructured.SetNestedSlice(u.Object, hooks, "webhooks"); err != nil {
			return err
		}
	}
	if !found {
		return fmt.Errorf("no %s among Kueue's webhooks", KueueTrainJobWebhook)
	}
	return nil
}
