package jobframework

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	crevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// childPriority is the queue priority of a pass caused by a JobSet, pod or
// Workload event. A new job (priority 0) goes first: under a burst of
// submissions it gets its JobSet before running jobs refresh their status,
// and the refreshes of one job coalesce while they wait.
const childPriority = -10

// lowPriority enqueues h's requests at childPriority when the controller's
// queue is a priority queue (controller-runtime's default), and as h would
// otherwise.
func lowPriority(h handler.EventHandler) handler.EventHandler {
	wrap := func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
		if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
			return prioritized{PriorityQueue: pq, priority: childPriority}
		}
		return q
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e crevent.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Create(ctx, e, wrap(q))
		},
		UpdateFunc: func(ctx context.Context, e crevent.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Update(ctx, e, wrap(q))
		},
		DeleteFunc: func(ctx context.Context, e crevent.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Delete(ctx, e, wrap(q))
		},
		GenericFunc: func(ctx context.Context, e crevent.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Generic(ctx, e, wrap(q))
		},
	}
}

// prioritized adds every item with one priority, unless the caller sets one
// (controller-runtime's handlers lower it further for unchanged objects).
type prioritized struct {
	priorityqueue.PriorityQueue[reconcile.Request]
	priority int
}

func (p prioritized) Add(item reconcile.Request) {
	p.AddWithOpts(priorityqueue.AddOpts{}, item)
}

func (p prioritized) AddAfter(item reconcile.Request, after time.Duration) {
	p.AddWithOpts(priorityqueue.AddOpts{After: after}, item)
}

func (p prioritized) AddRateLimited(item reconcile.Request) {
	p.AddWithOpts(priorityqueue.AddOpts{RateLimited: true}, item)
}

func (p prioritized) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	if o.Priority == nil || *o.Priority > p.priority {
		o.Priority = &p.priority
	}
	p.PriorityQueue.AddWithOpts(o, items...)
}

// podChanged passes pod updates that can change a TrainJob's status: the
// phase, readiness, scheduling, a container's waiting reason, deletion, or the
// labels that tie the pod to its JobSet. kwok and kubelets update pods more
// often than that (IPs, start times, container IDs).
var podChanged = predicate.Funcs{
	UpdateFunc: func(e crevent.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.Pod)
		n, ok2 := e.ObjectNew.(*corev1.Pod)
		if !ok1 || !ok2 {
			return true
		}
		return podSummary(o) != podSummary(n)
	},
}

type podState struct {
	phase                corev1.PodPhase
	ready, scheduled     corev1.ConditionStatus
	schedReason, waiting string
	deleting             bool
	jobset, jobsetUID    string
}

func podSummary(p *corev1.Pod) podState {
	s := podState{phase: p.Status.Phase, deleting: p.DeletionTimestamp != nil,
		jobset: p.Labels[jobsetv1alpha2.JobSetNameKey], jobsetUID: p.Labels[jobsetv1alpha2.JobSetUIDKey]}
	for _, c := range p.Status.Conditions {
		switch c.Type {
		case corev1.PodReady:
			s.ready = c.Status
		case corev1.PodScheduled:
			s.scheduled, s.schedReason = c.Status, c.Reason+": "+c.Message
		}
	}
	var waiting []string
	for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		if w := cs.State.Waiting; w != nil {
			waiting = append(waiting, cs.Name+"="+w.Reason+": "+w.Message)
		}
	}
	s.waiting = fmt.Sprint(waiting)
	return s
}
