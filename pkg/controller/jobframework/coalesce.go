package jobframework

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Held status changes (memory.due, memory.events). A job's status follows
// every pod and JobSet transition; written at once, a two-node job costs
// about seven status writes on its way from Pending to Complete, most of them
// a count moving by one a moment before the next. Holding a change for a
// short while lets the transitions of one moment go out as one write: a
// change of phase, reason or condition waits at most Options.StatusDelay, a
// change of counts only (Decision.CountsOnly) at most Options.CountsDelay,
// and the write goes out when the first of the waiting changes is due,
// carrying all of them.
//
// Only the status waits, and only when nothing else happened in the pass: a
// pass that wrote a child, patched or deleted something, or failed, writes at
// once. Events that follow from the status change (Running, Completed) wait
// with it: the next pass computes them again from the same stored status, so
// they are neither lost nor sent twice. A change is never dropped: the pass
// that holds it asks to be requeued when it is due, and that pass writes
// whatever the status is then. The memory is lost with the process; a
// restarted manager sees the change again and waits once more, no longer.
// The same due time bounds a deferred status (Decision.DeferFor,
// deferStatus): a pass that defers it even though it acted still has a due
// time.
//
// A deferred status also holds the events of what its pass synced (Created
// JobSet ...): they go out with the status, from the pass the deferral leaves
// it to. Under a burst of new jobs that pass waits behind the others' creates
// (childPriority), and so do the events, one per job, that would otherwise
// compete with those creates. A restart loses them with the rest of this
// memory; the children they tell of are there to see.

// holdStatus decides whether this pass's status write waits, and for how
// long (0: write now). It waits when the status changed, the pass did
// nothing else that must be acted on at once, and the change is not due yet.
func (r *Reconciler) holdStatus(key types.NamespacedName, job client.Object, out Decision, sync Sync) time.Duration {
	if out.Job == nil || statusEqual(job, out.Job) {
		r.memory.done(key)
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
	return r.memory.wait(key, r.wall.Now(), allowance)
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
		r.memory.wait(key, r.wall.Now(), 0)
		return true, 0
	}
	wait := r.memory.wait(key, r.wall.Now(), out.DeferFor)
	return wait > 0, wait
}
