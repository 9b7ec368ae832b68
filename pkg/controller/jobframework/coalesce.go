package jobframework

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// held remembers, per job, when a status change that is waiting to be
// written is due. A job's status follows every pod and JobSet transition;
// written at once, a two-node job costs about seven status writes on its way
// from Pending to Complete, most of them a count moving by one a moment
// before the next. Holding a change for a short while lets the transitions
// of one moment go out as one write: a change of phase, reason or condition
// waits at most Options.StatusDelay, a change of counts only (Decision.
// CountsOnly) at most Options.CountsDelay, and the write goes out when the
// first of the waiting changes is due, carrying all of them.
//
// Only the status waits, and only when nothing else happened in the pass: a
// pass that wrote a child, patched or deleted something, or failed, writes at
// once. Events that follow from the status change (Running, Completed) wait
// with it: the next pass computes them again from the same stored status, so
// they are neither lost nor sent twice. A change is never dropped: the pass
// that holds it asks to be requeued when it is due, and that pass writes
// whatever the status is then. The memory is lost with the process; a
// restarted manager sees the change again and waits once more, no longer.
// The same memory bounds a deferred status (Decision.DeferFor, deferStatus):
// a pass that defers it even though it acted still has a due time.
//
// A deferred status also holds the events of what its pass synced (Created
// JobSet ...): they go out with the status, from the pass the deferral leaves
// it to. Under a burst of new jobs that pass waits behind the others' creates
// (childPriority), and so do the events, one per job, that would otherwise
// compete with those creates. A restart loses them with the rest of this
// memory; the children they tell of are there to see.
type held struct {
	mu     sync.Mutex
	due    map[types.NamespacedName]time.Time
	events map[types.NamespacedName][]Event
}

// holdEvents keeps events to send with the job's next status write.
func (h *held) holdEvents(key types.NamespacedName, evs []Event) {
	if len(evs) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.events == nil {
		h.events = map[types.NamespacedName][]Event{}
	}
	h.events[key] = append(h.events[key], evs...)
}

// takeEvents returns and forgets the events held for the job.
func (h *held) takeEvents(key types.NamespacedName) []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	evs := h.events[key]
	deleteKey(&h.events, key)
	return evs
}

// forget drops all the job's memory: it is gone, or not ours to write.
func (h *held) forget(key types.NamespacedName) {
	h.mu.Lock()
	defer h.mu.Unlock()
	deleteKey(&h.due, key)
	deleteKey(&h.events, key)
}

// wait records a change of a job's status seen at now that may wait up to
// allowance, and reports how long the job's write must still wait: 0 when it
// is due.
func (h *held) wait(key types.NamespacedName, now time.Time, allowance time.Duration) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.due == nil {
		h.due = map[types.NamespacedName]time.Time{}
	}
	due, ok := h.due[key]
	if !ok || now.Add(allowance).Before(due) {
		due = now.Add(allowance)
		h.due[key] = due
	}
	return max(due.Sub(now), 0)
}

// done forgets a job's waiting change: it was written, or there is none.
func (h *held) done(key types.NamespacedName) {
	h.mu.Lock()
	defer h.mu.Unlock()
	deleteKey(&h.due, key)
}

// holdStatus decides whether this pass's status write waits, and for how
// long (0: write now). It waits when the status changed, the pass did
// nothing else that must be acted on at once, and the change is not due yet.
func (r *Reconciler) holdStatus(key types.NamespacedName, job client.Object, out Decision, sync Sync) time.Duration {
	if out.Job == nil || statusEqual(job, out.Job) {
		r.held.done(key)
		return 0
	}
	if len(sync.Result.Actions) > 0 || len(out.Patches) > 0 || len(out.Delete) > 0 || out.Retry != nil {
		return 0
	}
	allowance := r.delays.StatusDelay
	if out.CountsOnly {
		allowance = max(r.delays.CountsDelay, allowance)
	}
	if allowance <= 0 {
		return 0
	}
	return r.held.wait(key, r.wall.Now(), allowance)
}

// deferStatus reports whether this pass leaves the status to a later one
// (Decision.Defer) and, for a bounded deferral, how long until the bound:
// a deferral that has lasted Decision.DeferFor since its first pass is over,
// and this pass writes.
func (r *Reconciler) deferStatus(key types.NamespacedName, out Decision) (bool, time.Duration) {
	if !out.Defer {
		return false, 0
	}
	if out.DeferFor <= 0 {
		// Left to the pass a child's creation event brings: that pass writes
		// at once (its change is due now), so that a new job costs two
		// passes, not a third one after StatusDelay.
		r.held.wait(key, r.wall.Now(), 0)
		return true, 0
	}
	wait := r.held.wait(key, r.wall.Now(), out.DeferFor)
	return wait > 0, wait
}

// deleteKey deletes a job's entry from one of the reconciler's per-job maps,
// and drops the map once it is empty: a Go map keeps the buckets of its
// largest size, so a burst of 1000 jobs would otherwise hold on to them
// (about 0.2 to 0.5 MB per map) long after every entry went.
func deleteKey[V any](m *map[types.NamespacedName]V, key types.NamespacedName) {
	delete(*m, key)
	if len(*m) == 0 {
		*m = nil
	}
}
