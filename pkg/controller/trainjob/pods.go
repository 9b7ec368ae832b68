package trainjob

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// livePods drops pods that are being deleted.
func livePods(pods []corev1.Pod) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
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
