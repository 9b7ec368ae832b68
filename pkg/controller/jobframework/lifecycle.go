package jobframework

import (
	"errors"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainyard/trainyard/pkg/childsync"
	"github.com/trainyard/trainyard/pkg/observe"
	"github.com/trainyard/trainyard/pkg/plan"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
)

// The rules of a job's life that every kind shares, applied by the
// framework to what a kind says of its jobs (Lifecycle), so that each is
// written once:
//   - a finished job gets no plan: it never gets new children;
//   - a job past its deadline gets no plan either; it fails (the kind says
//     how, told by Sync.DeadlineExceeded) and its JobSet is deleted, which
//     stops its pods; unless the JobSet finished first and status has not
//     caught up yet, when the job ends as its JobSet did;
//   - a running job with a deadline is looked at again when it is due;
//   - a finished job is deleted once its TTL after finishing has passed (in
//     the background, with a UID precondition, so a job recreated under the
//     same name is safe from an old pass; the garbage collector removes its
//     children); the pass that finishes it writes its status first;
//   - a pass whose error retrying cannot fix looks again after a time that
//     follows from the error (retryAfter).

// Lifecycle is a kind whose jobs finish, may have a deadline and a TTL after
// finishing: the framework applies the rules above to them.
type Lifecycle interface {
	// Finished reports whether the job (as given: stored, or as the pass
	// updated it) has finished, and when (nil while not recorded).
	Finished(job client.Object) (bool, *metav1.Time)
	// TTLAfterFinished is how many seconds a finished job is kept (nil:
	// for ever).
	TTLAfterFinished(job client.Object) *int32
	// Deadline is when the job, as of now, must have finished (false: it
	// has no deadline now, e.g. while suspended).
	Deadline(job client.Object, now time.Time) (time.Time, bool)
}

// LookupRecheck is how soon a job whose plan failed on a lookup of another
// object (a PriorityClass that does not exist yet) is looked at again:
// nothing about the job will change to wake it.
const LookupRecheck = 30 * time.Second

// NotOwnedRecheck is how soon a job looks again at a child name someone else
// holds (or a child kind the cluster does not serve): that object's changes
// do not wake the job.
const NotOwnedRecheck = time.Minute

// retryAfter is when a pass whose planning or syncing failed for good
// (Permanent) looks again: some such errors go away without a change of the
// job that would wake it. 0: never (the change that fixes it wakes the job).
// Other errors are retried with the queue's backoff.
func retryAfter(err error) time.Duration {
	switch {
	case framework.NeedsRecheck(err):
		return LookupRecheck
	case errors.Is(err, childsync.ErrNotOwned), errors.Is(err, childsync.ErrKindNotServed):
		return NotOwnedRecheck
	}
	return 0
}

// ending is what the lifecycle rules say of a job at the start of a pass.
type ending struct {
	// finished: the stored job has finished.
	finished bool
	// pastDeadline: it has not, its deadline has passed, and its JobSet
	// has not finished first.
	pastDeadline bool
}

// ended applies the lifecycle rules to the job as stored.
func ended(a Adapter, job client.Object, obs *observe.Observed, now time.Time) ending {
	lc, ok := a.(Lifecycle)
	if !ok {
		return ending{}
	}
	if done, _ := lc.Finished(job); done {
		return ending{finished: true}
	}
	at, ok := lc.Deadline(job, now)
	if !ok || now.Before(at) {
		return ending{}
	}
	_, jobSetDone := observe.Finished(obs.JobSet(job.GetName()))
	return ending{pastDeadline: !jobSetDone}
}

// PlanFor is the plan step of a pass: nothing for a finished job, nor for
// one past its deadline; else the kind's plan.
func PlanFor(a Adapter, job client.Object, obs *observe.Observed, now time.Time) (*plan.Plan, error) {
	if e := ended(a, job, obs, now); e.finished || e.pastDeadline {
		return nil, nil
	}
	return a.Plan(job, obs, now)
}

// applyLifecycle adds the lifecycle rules to a decision: what to delete, and
// when to look again.
func applyLifecycle(a Adapter, job client.Object, obs *observe.Observed, sync Sync, now time.Time, d *Decision) {
	if sync.Err != nil {
		d.Requeue = sooner(d.Requeue, retryAfter(sync.Err))
	}
	lc, ok := a.(Lifecycle)
	if !ok {
		return
	}
	if done, at := lc.Finished(job); done {
		if ttlDue(lc.TTLAfterFinished(job), at, now) {
			d.Delete = append(d.Delete, job)
			return
		}
		d.Requeue = sooner(d.Requeue, TTLRemaining(lc.TTLAfterFinished(job), at, now))
		return
	}
	if sync.DeadlineExceeded {
		if js := obs.JobSet(job.GetName()); js != nil {
			d.Delete = append([]client.Object{js}, d.Delete...)
		}
	}
	if d.Job == nil {
		return
	}
	if done, at := lc.Finished(d.Job); done {
		// This pass writes the final status; the one after the TTL deletes
		// the job (the controller's own status write may wake nothing).
		if ttl := lc.TTLAfterFinished(d.Job); ttl != nil {
			d.Requeue = sooner(d.Requeue, max(TTLRemaining(ttl, at, now), time.Millisecond))
		}
		return
	}
	if at, ok := lc.Deadline(d.Job, now); ok {
		d.Requeue = sooner(d.Requeue, max(at.Sub(now), time.Millisecond))
	}
}

// TTLRemaining is how long a job that finished at completion has left
// before its TTL deletes it: 0 when it has no TTL, has not finished, or is
// due.
func TTLRemaining(ttlSeconds *int32, completion *metav1.Time, now time.Time) time.Duration {
	if ttlSeconds == nil || completion == nil {
		return 0
	}
	return max(completion.Add(time.Duration(*ttlSeconds)*time.Second).Sub(now), 0)
}

// ttlDue reports whether a finished job's TTL has passed.
func ttlDue(ttlSeconds *int32, completion *metav1.Time, now time.Time) bool {
	return ttlSeconds != nil && completion != nil && TTLRemaining(ttlSeconds, completion, now) == 0
}

// sooner is the sooner of two requeue times, 0 meaning none.
func sooner(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return min(a, b)
}
