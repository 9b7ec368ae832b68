// Package jobframework is Trainyard's one reconciler for every job kind
// (TrainJob, PyTorchJob). A kind plugs in through a small Adapter: what its
// object is, whether this controller runs it, how it resolves to a plan of
// children (its runtime and plugin list), and how its status follows, purely,
// from what was observed. The reconciler does the rest in one loop of named
// steps: get the job, observe its children once, plan, sync the plan, compute
// status, act on what status decided (deletions, pod labels), write status
// once, send events.
package jobframework

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainyard/trainyard/pkg/childsync"
	"github.com/trainyard/trainyard/pkg/observe"
	"github.com/trainyard/trainyard/pkg/plan"
)

// FieldOwner is the field manager of every write Trainyard makes.
const FieldOwner = "trainyard"

// Event reasons of what syncing a plan does, the same for every job kind.
const (
	EventJobSetCreated   = "JobSetCreated"
	EventJobSetUpdated   = "JobSetUpdated"
	EventJobSetRecreated = "JobSetRecreated"
	EventJobSetNotOwned  = "JobSetNotOwned"
)

// Adapter is one job kind.
type Adapter interface {
	// Kind names the job kind, as in its API (TrainJob, PyTorchJob).
	Kind() string
	// New returns an empty job object of the kind.
	New() client.Object
	// Ours reports whether this controller runs the job (not another one named
	// by managedBy).
	Ours(job client.Object) bool
	// Plan returns the children the job should have now, or nil when nothing
	// is to be synced this pass (a finished job, one past its deadline). It
	// may read the job's runtime through r; it writes nothing. Input the user
	// must fix is returned as a *framework.InvalidError.
	Plan(ctx context.Context, r client.Reader, job client.Object, obs *observe.Observed, now time.Time) (*plan.Plan, error)
	// Status computes the job's new state from the job, what was observed, and
	// what syncing the plan did. It is pure: it reads no client and changes
	// nothing but what it returns.
	Status(job client.Object, obs *observe.Observed, sync Sync, now time.Time) Outcome
}

// Sync is what the plan step and the sync step of a pass did.
type Sync struct {
	// Planned is true when Plan returned a plan.
	Planned bool
	// Result says what was written, child by child.
	Result childsync.Result
	// Err is the error of planning or syncing (nil when both went well).
	Err error
}

// After is what was observed with the children as syncing left them: the
// observed ones, updated with what this pass wrote (as observed when the
// pass planned nothing).
func (s Sync) After(obs *observe.Observed) *observe.Observed {
	after := *obs
	if s.Result.Children != nil {
		after.Children = s.Result.Children
	}
	return &after
}

// Event is an event about the job, sent after its status was written.
type Event struct {
	Type, Reason, Action, Message string
}

// Patch is a merge patch of an object the job owns (its pods' labels).
type Patch struct {
	Object client.Object
	Data   []byte
}

// Outcome is what a pass decided.
type Outcome struct {
	// Job is a copy of the job with its new status.
	Job client.Object
	// Events go out once the status is written.
	Events []Event
	// Delete lists objects to delete (with a UID precondition), in order: a
	// JobSet past its deadline, pods by cleanPodPolicy, the job itself past
	// its TTL (then no status is written).
	Delete []client.Object
	// Patches are applied before the status is written.
	Patches []Patch
	// Requeue asks for a pass after this long (0: only on events).
	Requeue time.Duration
	// DeferStatus leaves the status write to the next pass: the one the new
	// JobSet's creation event brings, so that under a burst of submissions
	// new jobs get their JobSets first; or the one another controller's next
	// write of the job brings (DeferFor). Patches and deletions wait with the
	// status. What syncing did is still told (SyncEvents, SyncRecord):
	// nothing else would tell it.
	DeferStatus bool
	// DeferFor bounds DeferStatus: the status is deferred at most this long
	// from the first pass that deferred it; a pass after that writes it.
	// Zero: no bound (the pass that is waited for is certain to come).
	DeferFor time.Duration
	// SyncEvents is how many of Events, the first ones, say what syncing
	// did; the others follow from the status change, and a deferred status
	// sends them when it is written.
	SyncEvents int
	// SyncRecord is called instead of Record when the status is deferred:
	// the metrics of what syncing did.
	SyncRecord func()
	// Retry is a transient error: the status is written, then the pass is
	// retried with backoff.
	Retry error
	// Record is called once the status is written (the pass's metrics,
	// SyncRecord's included).
	Record func()
	// CountsOnly says that the status changed in counts only (counts no
	// kubectl get column shows, such as the JobSet's job counts, and the
	// message that says them): the write may wait longer for the next
	// transition (Delays.CountsDelay).
	CountsOnly bool
}
