package jobframework

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	crevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Every kind of child event waits behind a new job.
func TestLowPriorityEveryEvent(t *testing.T) {
	pod := podOf("running-node-0-0", "running", corev1.PodRunning)
	h := lowPriority(handler.EnqueueRequestsFromMapFunc(PodToJob))
	cases := map[string]func(q workqueue.TypedRateLimitingInterface[reconcile.Request]){
		"create": func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Create(context.Background(), crevent.CreateEvent{Object: pod}, q)
		},
		"update": func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Update(context.Background(), crevent.UpdateEvent{ObjectOld: pod, ObjectNew: pod}, q)
		},
		"delete": func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Delete(context.Background(), crevent.DeleteEvent{Object: pod}, q)
		},
		"generic": func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Generic(context.Background(), crevent.GenericEvent{Object: pod}, q)
		},
	}
	for name, send := range cases {
		t.Run(name, func(t *testing.T) {
			q := priorityqueue.New[reconcile.Request]("test")
			defer q.ShutDown()
			send(q)
			q.Add(reconcile.Request{NamespacedName: key(testNS, "new")})
			if diff := cmp.Diff([]string{"new", "running"}, drain(q, 2)); diff != "" {
				t.Errorf("order (-want +got):\n%s", diff)
			}
		})
	}
}

// On a plain rate-limiting queue, child events are enqueued as the wrapped
// handler would.
func TestLowPriorityPlainQueue(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	pod := podOf("running-node-0-0", "running", corev1.PodRunning)
	lowPriority(handler.EnqueueRequestsFromMapFunc(PodToJob)).Create(context.Background(), crevent.CreateEvent{Object: pod}, q)
	if q.Len() != 1 {
		t.Fatalf("queue length %d, want 1", q.Len())
	}
	item, _ := q.Get()
	if diff := cmp.Diff(reconcile.Request{NamespacedName: key(testNS, "running")}, item); diff != "" {
		t.Errorf("item (-want +got):\n%s", diff)
	}
}

// A rate-limited retry of a child event keeps the child priority.
func TestPrioritizedAddRateLimited(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	p := prioritized{PriorityQueue: q, priority: childPriority}
	p.AddRateLimited(reconcile.Request{NamespacedName: key(testNS, "retry")})
	done := make(chan string, 1)
	go func() {
		item, _ := q.Get()
		q.Done(item)
		done <- item.Name
	}()
	select {
	case got := <-done:
		if got != "retry" {
			t.Errorf("got %q, want retry", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("rate-limited item never came out")
	}
}
