package jobframework

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	crevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// A new TrainJob queued after a pod event of a running job is still
// reconciled first.
func TestChildEventsWaitBehindNewTrainJobs(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "running-node-0-0-x",
		Labels: map[string]string{jobsetv1alpha2.JobSetNameKey: "running"}}}
	lowPriority(handler.EnqueueRequestsFromMapFunc(PodToJob)).Create(context.Background(), crevent.CreateEvent{Object: pod}, q)
	q.Add(reconcile.Request{NamespacedName: key("ns", "new")})

	got := drain(q, 2)
	if diff := cmp.Diff([]string{"new", "running"}, got); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}

func TestPrioritizedKeepsLowerPriorities(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	p := prioritized{PriorityQueue: q, priority: childPriority}
	low := handler.LowPriority
	p.AddWithOpts(priorityqueue.AddOpts{Priority: &low}, reconcile.Request{NamespacedName: key("ns", "resync")})
	p.Add(reconcile.Request{NamespacedName: key("ns", "child")})
	p.AddAfter(reconcile.Request{NamespacedName: key("ns", "later")}, time.Hour)
	got := drain(q, 2)
	if diff := cmp.Diff([]string{"child", "resync"}, got); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}

func TestPodChanged(t *testing.T) {
	base := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{jobsetv1alpha2.JobSetNameKey: "j"}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			{Type: corev1.PodReady, Status: corev1.ConditionFalse}}},
	}
	cases := map[string]struct {
		change func(*corev1.Pod)
		want   bool
	}{
		"nothing we read": {func(p *corev1.Pod) { p.Status.PodIP = "10.0.0.1"; p.ResourceVersion = "2" }, false},
		"ready":           {func(p *corev1.Pod) { p.Status.Conditions[1].Status = corev1.ConditionTrue }, true},
		"phase":           {func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }, true},
		"deleting":        {func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} }, true},
		"unschedulable": {func(p *corev1.Pod) {
			p.Status.Conditions[0] = corev1.PodCondition{Type: corev1.PodScheduled, Status: "False", Reason: "Unschedulable"}
		}, true},
		"image pull error": {func(p *corev1.Pod) { p.Status.ContainerStatuses = waiting("ErrImagePull") }, true},
		"label":            {func(p *corev1.Pod) { p.Labels[jobsetv1alpha2.JobSetUIDKey] = "u" }, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			old := base.DeepCopy()
			cur := base.DeepCopy()
			tc.change(cur)
			if got := podChanged.Update(crevent.UpdateEvent{ObjectOld: old, ObjectNew: cur}); got != tc.want {
				t.Errorf("podChanged = %v, want %v", got, tc.want)
			}
		})
	}
}

func waiting(reason string) []corev1.ContainerStatus {
	return []corev1.ContainerStatus{{Name: "node", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}}
}

func key(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

// drain takes n items off q, in the order the queue hands them out.
func drain(q priorityqueue.PriorityQueue[reconcile.Request], n int) []string {
	var names []string
	for range n {
		item, _ := q.Get()
		names = append(names, item.Name)
		q.Done(item)
	}
	return names
}
