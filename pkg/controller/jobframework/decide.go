package jobframework

import (
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainyard/trainyard/pkg/childsync"
	"github.com/trainyard/trainyard/pkg/observe"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
)

// Decision is what a pass does after syncing: the kind's Outcome, and the
// framework's rules of when to write it, what to tell of syncing and whether
// to retry. Decide makes it; it is pure.
type Decision struct {
	Outcome
	// SyncEvents say what syncing did. No later pass would tell them: they go
	// out from the pass that writes the status, this one or, when it defers,
	// the one it defers to (the Reconciler holds them until then).
	SyncEvents []Event
	// Defer leaves the status write (and the Outcome's patches, deletions
	// and events) to a later pass: the one the new JobSet's creation event
	// brings, so that under a burst new jobs get their JobSets first and a
	// job's first status coalesces with its JobSet's; or, bounded by
	// DeferFor, the one another controller's next write of the job brings.
	Defer    bool
	DeferFor time.Duration
	// CountsOnly: the status changed in counts only (CountsJudge); the write
	// may wait Delays.CountsDelay.
	CountsOnly bool
	// Retry is a transient error of planning or syncing: the status is
	// written, then the pass is retried with backoff.
	Retry error
}

// Decide runs the kind's status step and applies the framework's rules to it.
func Decide(a Adapter, job client.Object, obs *observe.Observed, sync Sync, now time.Time) Decision {
	sync.DeadlineExceeded = ended(a, job, obs, now).pastDeadline
	d := Decision{Outcome: a.Status(job, obs, sync, now)}
	applyLifecycle(a, job, obs, sync, now, &d)
	d.SyncEvents = syncEvents(job, sync)
	if e, ok := a.(SyncEventer); ok && sync.Err == nil {
		d.SyncEvents = append(d.SyncEvents, e.SyncEvents(job, sync)...)
	}
	if sync.Err != nil && !Permanent(sync.Err) {
		d.Retry = sync.Err
	}
	changed := d.Job != nil && !statusEqual(job, d.Job)
	if c, ok := a.(CountsJudge); ok && changed {
		d.CountsOnly = c.CountsOnly(job, d.Job)
	}
	switch {
	case sync.Err == nil && sync.Result.Action(observe.JobSetKind, job.GetName()) == childsync.Created:
		d.Defer = true
	case sync.Err == nil && changed:
		if w, ok := a.(Deferrer); ok {
			if bound := w.DeferStatus(job, d.Job); bound > 0 {
				d.Defer, d.DeferFor = true, bound
			}
		}
	}
	return d
}

// syncEvents are the events of what syncing the job's JobSet did, the same
// for every kind.
func syncEvents(job client.Object, sync Sync) []Event {
	if sync.Err != nil {
		return nil
	}
	name := job.GetName()
	switch sync.Result.Action(observe.JobSetKind, name) {
	case childsync.Created:
		return []Event{{Type: corev1.EventTypeNormal, Reason: EventJobSetCreated, Action: "Create", Message: "Created JobSet " + name}}
	case childsync.Recreated:
		return []Event{{Type: corev1.EventTypeNormal, Reason: EventJobSetRecreated, Action: "Create", Message: "Recreated suspended JobSet " + name + ": its immutable template changed"}}
	case childsync.Updated:
		return []Event{{Type: corev1.EventTypeNormal, Reason: EventJobSetUpdated, Action: "Update", Message: "Updated suspended JobSet " + name}}
	}
	return nil
}

// Permanent reports whether an error of planning or syncing is one that
// retrying cannot fix: input the user must fix, a runtime that does not
// exist or is not supported, a child someone else owns, a child kind the
// cluster does not serve. Such an error is reported in status (a change of
// the job or its runtime brings the next pass); any other is retried.
func Permanent(err error) bool {
	return framework.IsInvalid(err) || errors.Is(err, runtime.ErrUnsupported) || errors.Is(err, runtime.ErrNotFound) ||
		errors.Is(err, childsync.ErrNotOwned) || errors.Is(err, childsync.ErrKindNotServed)
}
