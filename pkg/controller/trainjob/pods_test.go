package trainjob

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestNodesState(t *testing.T) {
	ready := corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	starting := corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}}}
	done := corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}
	pullErr := corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
		Name: "node", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "back-off"}}}}}}
	pullErr.Name = "j-node-0-1"
	unschedulable := corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes are available"}}}}
	unschedulable.Name = "j-node-0-0"

	type out struct {
		Ready, Succeeded int32
		Reason, Message  string
	}
	cases := map[string]struct {
		pods []corev1.Pod
		want out
	}{
		"no pods yet":         {nil, out{0, 0, "WaitingForPods", "0/2 nodes running"}},
		"one ready":           {[]corev1.Pod{ready, starting}, out{1, 0, "WaitingForPods", "1/2 nodes running"}},
		"all ready":           {[]corev1.Pod{ready, ready}, out{2, 0, "", ""}},
		"one finished first":  {[]corev1.Pod{done, ready}, out{1, 1, "", ""}},
		"all finished":        {[]corev1.Pod{done, done}, out{0, 2, "", ""}},
		"image pull problem":  {[]corev1.Pod{ready, pullErr}, out{1, 0, "ImagePullBackOff", "pod j-node-0-1: container node: ImagePullBackOff: back-off"}},
		"unschedulable first": {[]corev1.Pod{unschedulable, pullErr}, out{0, 0, "Unschedulable", "pod j-node-0-0: 0/3 nodes are available"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got out
			got.Ready, got.Succeeded, got.Reason, got.Message = nodesState(tc.pods, 2)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("nodesState (-want +got):\n%s", diff)
			}
		})
	}
}
