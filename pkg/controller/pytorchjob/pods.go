package pytorchjob

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	legacy "github.com/trainyard/trainyard/pkg/legacy/pytorchjob"
)

// jobPods lists the pods of a PyTorchJob (through every JobSet it had), by
// name. They come from the manager's pod cache, which holds JobSet pods only.
func (r *Reconciler) jobPods(ctx context.Context, job *kubeflowv1.PyTorchJob) ([]corev1.Pod, error) {
	var list corev1.PodList
	if err := r.List(ctx, &list, client.InNamespace(job.Namespace), client.MatchingLabels(legacy.SelectorLabels(job.Name))); err != nil {
		return nil, fmt.Errorf("listing pods of PyTorchJob %s: %w", job.Name, err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items, nil
}

// jobSetPods lists the pods of the job's current JobSet: pods of a JobSet that
// was recreated (while suspended) are not the job's any more.
func (r *Reconciler) jobSetPods(ctx context.Context, job *kubeflowv1.PyTorchJob, js *jobsetv1alpha2.JobSet) ([]corev1.Pod, error) {
	if js == nil {
		return nil, nil
	}
	all, err := r.jobPods(ctx, job)
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range all {
		if p.Labels[jobsetv1alpha2.JobSetUIDKey] == string(js.UID) {
			out = append(out, p)
		}
	}
	return out, nil
}

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
	want := map[string]string{legacy.LegacyJobNameLabel: job.Name}
	for k, v := range want {
		if pod.Labels[k] == v {
			delete(want, k)
		}
	}
	return want
}

// labelPods sets the labels of podLabels on every live pod that lacks them.
func (r *Reconciler) labelPods(ctx context.Context, job *kubeflowv1.PyTorchJob, pods []corev1.Pod) error {
	for i := range pods {
		pod := &pods[i]
		if pod.DeletionTimestamp != nil {
			continue
		}
		want := podLabels(job, pod)
		if len(want) == 0 {
			continue
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": want}})
		if err != nil {
			return fmt.Errorf("encoding labels of pod %s: %w", pod.Name, err)
		}
		if err := r.Patch(ctx, pod, client.RawPatch(client.Merge.Type(), patch), client.FieldOwner(FieldOwner)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("labelling pod %s: %w", pod.Name, err)
		}
		ctrl.LoggerFrom(ctx).V(3).Info("Labelled pod", "pod", pod.Name, "labels", want)
	}
	return nil
}

// cleanUp applies cleanPodPolicy to a finished job. None keeps every pod;
// Running deletes the pods still running or pending; All deletes every pod.
// Running and All also delete the Services: a finished job's DNS names serve
// nothing.
//
// JobSet itself deletes the Jobs that have not finished when the JobSet
// finishes (e.g. workers still running when the Master succeeded), so pods
// still running at the end are stopped under every policy; None keeps the pods
// that finished, with their logs, which is what None is used for.
func (r *Reconciler) cleanUp(ctx context.Context, job *kubeflowv1.PyTorchJob) error {
	policy := *job.Spec.RunPolicy.CleanPodPolicy
	if policy == kubeflowv1.CleanPodPolicyNone {
		return nil
	}
	pods, err := r.jobPods(ctx, job)
	if err != nil {
		return err
	}
	for i := range pods {
		pod := &pods[i]
		if pod.DeletionTimestamp != nil {
			continue
		}
		if policy == kubeflowv1.CleanPodPolicyRunning && pod.Status.Phase != corev1.PodRunning && pod.Status.Phase != corev1.PodPending {
			continue
		}
		ctrl.LoggerFrom(ctx).V(2).Info("Deleting pod of finished PyTorchJob", "pod", pod.Name, "phase", pod.Status.Phase, "cleanPodPolicy", policy)
		if err := r.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting pod %s of finished PyTorchJob (cleanPodPolicy %s): %w", pod.Name, policy, err)
		}
	}
	return r.deleteServices(ctx, job)
}

// podToPyTorchJob maps a pod to its PyTorchJob by the labels every pod of
// one carries.
func podToPyTorchJob(_ context.Context, o client.Object) []reconcile.Request {
	l := o.GetLabels()
	if l[kubeflowv1.OperatorNameLabel] != legacy.OperatorName || l[kubeflowv1.JobNameLabel] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: l[kubeflowv1.JobNameLabel]}}}
}
