package pytorchjob

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
	"github.com/trainyard/trainyard/pkg/observe"
)

// podLabels are the labels the controller sets on a pod once it exists.
//
// job-name=<job>: v1-era scripts select pods with `-l job-name=<job>`, but the
// label cannot be in the pod template. The API server generates a batch Job's
// selector and rejects a Job whose template carries job-name other than the
// Job's own name (generateSelector and validateGeneratedSelector), and each
// pod here belongs to a Job named <job>-<replicated job>-0. The Job selects
// its pods by controller-uid, so relabelling a pod after creation is safe. Until
// it happens (normally well under a second after the pod is created), the pod
// carries job-name=<its batch Job's name>, and `-l job-name=<job>` misses it.
func podLabels(job *kubeflowv1.PyTorchJob, pod *corev1.Pod) map[string]string {
	want := map[string]string{LegacyJobNameLabel: job.Name}
	for k, v := range want {
		if pod.Labels[k] == v {
			delete(want, k)
		}
	}
	return want
}

// labelPatches are the merge patches that give every live pod the labels of
// podLabels it lacks.
func labelPatches(job *kubeflowv1.PyTorchJob, pods []corev1.Pod) []jobframework.Patch {
	var out []jobframework.Patch
	for i := range pods {
		pod := &pods[i]
		if pod.DeletionTimestamp != nil {
			continue
		}
		want := podLabels(job, pod)
		if len(want) == 0 {
			continue
		}
		data, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": want}})
		if err != nil {
			continue // a map of strings always encodes
		}
		out = append(out, jobframework.Patch{Object: pod.DeepCopy(), Data: data})
	}
	return out
}

// cleanUp applies cleanPodPolicy to a finished job: the pods and Services to
// delete. None keeps every pod; Running deletes the pods still running or
// pending; All deletes every pod. Running and All also delete the Services: a
// finished job's DNS names serve nothing.
//
// JobSet itself deletes the Jobs that have not finished when the JobSet
// finishes (e.g. workers still running when the Master succeeded), so pods
// still running at the end are stopped under every policy; None keeps the pods
// that finished, with their logs, which is what None is used for.
func cleanUp(job *kubeflowv1.PyTorchJob, obs *observe.Observed) []client.Object {
	policy := *job.Spec.RunPolicy.CleanPodPolicy
	if policy == kubeflowv1.CleanPodPolicyNone {
		return nil
	}
	var out []client.Object
	for i := range obs.Pods {
		pod := &obs.Pods[i]
		if pod.DeletionTimestamp != nil {
			continue
		}
		if policy == kubeflowv1.CleanPodPolicyRunning && pod.Status.Phase != corev1.PodRunning && pod.Status.Phase != corev1.PodPending {
			continue
		}
		out = append(out, pod.DeepCopy())
	}
	return append(out, services(obs)...)
}

// services are the job's Services, as observed.
func services(obs *observe.Observed) []client.Object {
	var out []client.Object
	for _, o := range obs.Children {
		if svc, ok := o.(*corev1.Service); ok && svc.DeletionTimestamp == nil {
			out = append(out, svc)
		}
	}
	return out
}
