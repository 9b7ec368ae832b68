package controller

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch

func metav1ObjectMeta(p *corev1.Pod) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
		Labels: p.Labels, DeletionTimestamp: p.DeletionTimestamp, CreationTimestamp: p.CreationTimestamp,
	}
}

// nodePods lists the live pods of a JobSet's replicated job, by name.
func (r *TrainJobReconciler) nodePods(ctx context.Context, js *jobsetv1alpha2.JobSet, rjob string) ([]corev1.Pod, error) {
	var list corev1.PodList
	if err := r.List(ctx, &list, client.InNamespace(js.Namespace), client.MatchingFields{podJobSetIndex: js.Name}); err != nil {
		return nil, fmt.Errorf("listing pods of JobSet %s: %w", js.Name, err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && p.Labels[jobsetv1alpha2.JobSetUIDKey] == string(js.UID) &&
			p.Labels[jobsetv1alpha2.ReplicatedJobNameKey] == rjob {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// podProblems are container waiting reasons that will not fix themselves soon;
// they are what a user needs to see while a job is pending.
var podProblems = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true, "ErrImageNeverPull": true,
	"CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true,
	"CrashLoopBackOff": true, "PreCreateHookError": true, "PostStartHookError": true,
}

// nodesState counts the nodes whose pod is ready and those whose pod already
// succeeded and, when not all have started, says why in one reason and
// message, looking at the pods in order.
func nodesState(pods []corev1.Pod, numNodes int32) (ready, succeeded int32, reason, message string) {
	for _, p := range pods {
		switch {
		case isReady(&p):
			ready++
		case p.Status.Phase == corev1.PodSucceeded:
			succeeded++
		}
	}
	if ready+succeeded >= numNodes {
		return ready, succeeded, "", ""
	}
	for _, p := range pods {
		if isReady(&p) || p.Status.Phase == corev1.PodSucceeded {
			continue
		}
		for _, cs := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			if w := cs.State.Waiting; w != nil && podProblems[w.Reason] {
				return ready, succeeded, w.Reason, fmt.Sprintf("pod %s: container %s: %s: %s", p.Name, cs.Name, w.Reason, w.Message)
			}
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason != "" {
				return ready, succeeded, c.Reason, fmt.Sprintf("pod %s: %s", p.Name, c.Message)
			}
		}
	}
	return ready, succeeded, "WaitingForPods", fmt.Sprintf("%d/%d nodes running", ready, numNodes)
}

func isReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podToTrainJob maps a pod to the TrainJob of its JobSet: Trainyard names each
// JobSet after its TrainJob. Pods of other JobSets map to a TrainJob that does
// not exist, which reconciles to nothing.
func podToTrainJob(_ context.Context, o client.Object) []reconcile.Request {
	name := o.GetLabels()[jobsetv1alpha2.JobSetNameKey]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: name}}}
}
