package trainjob

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/childsync"
	"github.com/trainyard/trainyard/pkg/observe"
)

// finishedJobSets remembers, per TrainJob (by UID), the last state of its
// JobSet once that JobSet finished, until the TrainJob's status says it
// finished too. Failed (and Complete) is terminal: a TrainJob never gets a new
// JobSet once its JobSet finished, even when that JobSet goes before the
// TrainJob's status was written — deleted by its own ttlSecondsAfterFinished
// a moment after it finished, or by hand. Without this memory such a job
// would look like one whose JobSet was never made, and get a new one
// (Kubeflow Trainer #3779; v2.4 makes Failed terminal).
//
// It is filled from the manager's JobSet informer (every event of a finished
// JobSet that a TrainJob controls, its deletion included), so it holds what
// was observed; the adapter reads it while observing (ReadInputs) and forgets
// a job once its status is finished. The memory goes with the process: a
// manager that restarts in the moment between a JobSet's finish and its
// deletion finds no JobSet and nothing remembered.
type finishedJobSets struct {
	mu sync.Mutex
	m  map[types.UID]*jobsetv1alpha2.JobSet
}

// get returns the last state of the finished JobSet of TrainJob uid, or nil.
func (f *finishedJobSets) get(uid types.UID) *jobsetv1alpha2.JobSet {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.m[uid]
}

// forget drops what is remembered of TrainJob uid.
func (f *finishedJobSets) forget(uid types.UID) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.m, uid)
	if len(f.m) == 0 {
		f.m = nil // a map keeps its buckets after a burst
	}
}

// observe records js when it finished and a TrainJob controls it, and
// returns that TrainJob's request.
func (f *finishedJobSets) observe(o client.Object) (reconcile.Request, bool) {
	js, ok := o.(*jobsetv1alpha2.JobSet)
	if !ok {
		return reconcile.Request{}, false
	}
	ref := metav1.GetControllerOf(js)
	if ref == nil || ref.Kind != trainer.TrainJobKind || ref.APIVersion != trainer.GroupVersion.String() {
		return reconcile.Request{}, false
	}
	if _, done := observe.Finished(js); !done {
		return reconcile.Request{}, false
	}
	last := js.DeepCopy()
	last.ManagedFields = nil
	f.mu.Lock()
	if f.m == nil {
		f.m = map[types.UID]*jobsetv1alpha2.JobSet{}
	}
	f.m[ref.UID] = last
	f.mu.Unlock()
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: js.Namespace, Name: ref.Name}}, true
}

// handler records finished JobSets as their events arrive. A deletion also
// brings its TrainJob a pass (after the recording), as the owner handler does.
func (f *finishedJobSets) handler() handler.EventHandler {
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, _ queue) { f.observe(e.Object) },
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, _ queue) { f.observe(e.ObjectNew) },
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q queue) {
			if req, ok := f.observe(e.Object); ok {
				q.Add(req)
			}
		},
	}
}

// withJobSet returns obs with js as the job's observed JobSet (the children
// map is copied; obs is not changed).
func withJobSet(obs *observe.Observed, js *jobsetv1alpha2.JobSet) *observe.Observed {
	out := *obs
	out.Children = make(childsync.Children, len(obs.Children)+1)
	for k, v := range obs.Children {
		out.Children[k] = v
	}
	out.Children[childsync.Key{GroupKind: observe.JobSetKind, Name: js.Name}] = js
	return &out
}
