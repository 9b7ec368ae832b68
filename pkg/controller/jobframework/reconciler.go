package jobframework

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainyard/trainyard/pkg/childsync"
	"github.com/trainyard/trainyard/pkg/observe"
)

// Reconciler runs every pass of one job kind.
type Reconciler struct {
	adapter  Adapter
	client   client.Client
	recorder events.EventRecorder
	clock    clock.PassiveClock
	syncer   *childsync.Syncer
	// kinds are the child kinds the plugins own that the cluster serves.
	kinds []schema.GroupVersionKind
	kueue bool
	// delays say how long a status change may wait to be written together
	// with the next ones; wall times the wait (the real clock: it paces
	// writes, whatever clock decides deadlines).
	delays Delays
	wall   clock.PassiveClock
	// memory is what the reconciler remembers of each job between passes
	// (held status changes and events, children expected in the cache,
	// taken names), timed by wall; forget drops a job's.
	memory memory
	// decide replaces Decide when set (a test decides for its adapter).
	decide func(Adapter, client.Object, *observe.Observed, Sync, time.Time) Decision
	// patchStatus, when set, merge-patches a job's status subresource
	// without reading the answer back (the manager's blindWriter); else
	// the client does.
	patchStatus func(ctx context.Context, obj client.Object, data []byte, fieldOwner string) error
}

// Reconcile is one pass over one job:
//  1. get the job; skip it when it is being deleted or is not ours;
//  2. observe, once, everything the pass needs: its children, pods,
//     Workloads, taken names and the kind's inputs (its runtime); nothing
//     is read after this;
//  3. plan: run the pipeline on what was observed (not for a finished job,
//     nor one past its deadline: lifecycle.go);
//  4. sync the plan, child by child, by each child's rule;
//  5. decide, purely: the kind's status from the job, what was observed and
//     what sync did, and the framework's rules (Decide): the deadline, the
//     TTL, when to retry, when to write the status;
//  6. act on what status decided (deletions, pod labels);
//  7. write status once, then send the pass's events. A status change may
//     wait a little (Options.Delays) to go out with the next ones.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	job := r.adapter.New()
	if err := r.client.Get(ctx, req.NamespacedName, job); err != nil {
		if apierrors.IsNotFound(err) {
			r.memory.forget(req.NamespacedName) // the job is gone
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !job.GetDeletionTimestamp().IsZero() || !r.adapter.Ours(job) {
		r.memory.forget(req.NamespacedName) // going, or another controller's
		return ctrl.Result{}, nil
	}
	log := ctrl.LoggerFrom(ctx)
	now := r.clock.Now()

	obs, err := r.observe(ctx, job)
	if err != nil {
		return ctrl.Result{}, err
	}
	if wait := r.memory.waiting(req.NamespacedName, obs, r.wall.Now()); wait > 0 {
		// Children an earlier pass created are not in the cache yet: their
		// creation events bring the next pass (the requeue is a fallback).
		log.V(3).Info("Waiting for the cache to show created children", "wait", wait)
		return ctrl.Result{RequeueAfter: wait}, nil
	}

	var sync Sync
	p, err := PlanFor(r.adapter, job, obs, now)
	switch {
	case err != nil:
		sync.Err = err
	case p != nil:
		sync.Planned = true
		sync.Result, sync.Err = r.syncer.Sync(ctx, job, p, obs.Children, obs.Taken)
		r.memory.created(req.NamespacedName, sync.Result, r.wall.Now(), r.observes)
		r.memory.refused(req.NamespacedName, sync.Err)
		for key, action := range sync.Result.Actions {
			log.V(2).Info("Child synced", "child", key.String(), "action", action)
		}
		if apierrors.HasStatusCause(sync.Err, corev1.NamespaceTerminatingCause) {
			// The namespace is being deleted, the job with it: children it
			// deleted first are not made again (each retry would be refused).
			log.V(2).Info("Namespace terminating: nothing synced", "error", sync.Err.Error())
			return ctrl.Result{}, nil
		}
	}

	decide := r.decide
	if decide == nil {
		decide = Decide
	}
	d := decide(r.adapter, job, obs, sync, now)
	if deferred, wait := r.deferStatus(req.NamespacedName, d); deferred {
		r.recordSync(job, sync, now)
		r.memory.holdEvents(req.NamespacedName, d.SyncEvents) // they go out with the status (see held)
		log.V(3).Info("Status deferred", "bound", wait)
		requeue := d.Requeue
		if wait > 0 && (requeue == 0 || wait < requeue) {
			requeue = wait
		}
		return ctrl.Result{RequeueAfter: requeue}, nil
	}
	if wait := r.holdStatus(req.NamespacedName, job, d, sync); wait > 0 {
		// Neither written nor recorded, and no events: the pass after the
		// wait computes them again from the same stored status.
		log.V(3).Info("Status change held", "wait", wait)
		if d.Requeue > 0 {
			wait = min(wait, d.Requeue)
		}
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	deleted, err := r.act(ctx, job, d.Outcome)
	if err != nil {
		return ctrl.Result{}, errors.Join(d.Retry, err)
	}
	if deleted {
		r.memory.forget(req.NamespacedName) // deleted by its TTL
		return ctrl.Result{}, nil
	}
	if err := r.writeStatus(ctx, job, d.Job); err != nil {
		return ctrl.Result{}, errors.Join(d.Retry, err)
	}
	r.memory.done(req.NamespacedName)
	r.recordSync(job, sync, now)
	if rec, ok := r.adapter.(Recorder); ok {
		rec.RecordStatus(job, d.Job, now)
	}
	r.sendEvents(job, r.memory.takeEvents(req.NamespacedName))
	r.sendEvents(job, d.SyncEvents)
	r.sendEvents(job, d.Events)
	if d.Retry != nil {
		return ctrl.Result{}, d.Retry
	}
	return ctrl.Result{RequeueAfter: d.Requeue}, nil
}

// recordSync records the metrics of what syncing did, for a kind with metrics.
func (r *Reconciler) recordSync(job client.Object, sync Sync, now time.Time) {
	if rec, ok := r.adapter.(Recorder); ok {
		rec.RecordSync(job, sync, now)
	}
}

func (r *Reconciler) sendEvents(job client.Object, events []Event) {
	for _, e := range events {
		var related k8sruntime.Object
		if e.Related != nil {
			related = e.Related
		}
		r.recorder.Eventf(job, related, e.Type, e.Reason, e.Action, "%s", e.Message)
	}
}

// act applies the outcome's patches and deletions, in order. It reports
// whether the job itself was deleted.
func (r *Reconciler) act(ctx context.Context, job client.Object, out Outcome) (bool, error) {
	log := ctrl.LoggerFrom(ctx)
	for _, p := range out.Patches {
		if err := r.client.Patch(ctx, p.Object, client.RawPatch(client.Merge.Type(), p.Data), client.FieldOwner(FieldOwner)); client.IgnoreNotFound(err) != nil {
			return false, fmt.Errorf("patching %s: %w", p.Object.GetName(), err)
		}
		log.V(3).Info("Patched", "object", p.Object.GetName(), "patch", string(p.Data))
	}
	deleted := false
	for _, o := range out.Delete {
		uid := o.GetUID()
		if err := r.client.Delete(ctx, o, client.PropagationPolicy(metav1.DeletePropagationBackground),
			client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
			return false, fmt.Errorf("deleting %s: %w", o.GetName(), err)
		}
		log.V(2).Info("Deleted", "object", o.GetName(), "kind", fmt.Sprintf("%T", o))
		deleted = deleted || uid == job.GetUID()
	}
	return deleted, nil
}

// writeStatus merge-patches the status subresource when it changed. The
// patch is made from the two statuses alone (the rest of the job is the
// same), which is what a merge patch of the whole objects would say.
func (r *Reconciler) writeStatus(ctx context.Context, old, updated client.Object) error {
	if updated == nil || statusEqual(old, updated) {
		return nil
	}
	data, err := statusPatch(old, updated)
	if err != nil {
		return fmt.Errorf("status patch of %s %s: %w", r.adapter.Kind(), old.GetName(), err)
	}
	if r.patchStatus != nil {
		err = r.patchStatus(ctx, updated, data, FieldOwner)
	} else {
		err = r.client.Status().Patch(ctx, updated, client.RawPatch(types.MergePatchType, data), client.FieldOwner(FieldOwner))
	}
	if err != nil {
		return fmt.Errorf("writing status of %s %s: %w", r.adapter.Kind(), old.GetName(), err)
	}
	log := ctrl.LoggerFrom(ctx)
	if log.V(3).Enabled() { // what changed, to read a job's status writes back from the log
		log.V(3).Info("Status updated", "patch", string(data))
	} else {
		log.V(2).Info("Status updated")
	}
	return nil
}

// statusPatch is the JSON merge patch from old's status to updated's.
func statusPatch(old, updated client.Object) ([]byte, error) {
	from, err := json.Marshal(struct {
		Status any `json:"status"`
	}{statusOf(old)})
	if err != nil {
		return nil, err
	}
	to, err := json.Marshal(struct {
		Status any `json:"status"`
	}{statusOf(updated)})
	if err != nil {
		return nil, err
	}
	return jsonpatch.CreateMergePatch(from, to)
}

// statusEqual reports whether two objects of a job kind have the same status.
func statusEqual(a, b client.Object) bool {
	return equality.Semantic.DeepEqual(statusOf(a), statusOf(b))
}

// statusOf returns the Status field of a job object (every job kind has one).
func statusOf(o client.Object) any {
	v := reflect.ValueOf(o)
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if f := v.FieldByName("Status"); f.IsValid() {
		return f.Interface()
	}
	return nil
}

// observes reports whether a pass lists the children of a kind.
func (r *Reconciler) observes(gk schema.GroupKind) bool {
	for _, k := range r.kinds {
		if k.GroupKind() == gk {
			return true
		}
	}
	return false
}

// newList returns an empty list of a kind: typed when the scheme knows the
// kind, unstructured otherwise (a CRD whose Go types Trainyard does not use).
func (r *Reconciler) newList(gvk schema.GroupVersionKind) (client.ObjectList, error) {
	listGVK := gvk.GroupVersion().WithKind(gvk.Kind + "List")
	if !r.client.Scheme().Recognizes(listGVK) {
		u := &unstructured.UnstructuredList{}
		u.SetGroupVersionKind(listGVK)
		return u, nil
	}
	o, err := r.client.Scheme().New(listGVK)
	if err != nil {
		return nil, fmt.Errorf("list type of %s: %w", gvk.Kind, err)
	}
	l, ok := o.(client.ObjectList)
	if !ok {
		return nil, fmt.Errorf("%T is not a list", o)
	}
	return l, nil
}

// meta returns the items of a list as objects.
func meta(list client.ObjectList) ([]client.Object, error) {
	items, err := apimeta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	out := make([]client.Object, 0, len(items))
	for _, it := range items {
		if o, ok := it.(client.Object); ok {
			out = append(out, o)
		}
	}
	return out, nil
}
