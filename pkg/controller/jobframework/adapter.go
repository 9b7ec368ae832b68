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
	// is to be synced this pass. It is not called for a finished job, nor
	// for one past its deadline (Lifecycle). It
	// reads nothing but the job and what was observed (what the kind needs
	// besides, it reads in InputReader.ReadInputs); it writes nothing. Input
	// the user must fix is returned as a *framework.InvalidError.
	Plan(job client.Object, obs *observe.Observed, now time.Time) (*plan.Plan, error)
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
	// DeadlineExceeded: the job's deadline has passed (Lifecycle), so the
	// pass planned nothing; the kind fails the job, the framework deletes
	// its JobSet.
	DeadlineExceeded bool
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
	// Related, when set, is the object the event is also about (a child):
	// events of one reason about different children stay separate events
	// (the recorder folds events of the same job, reason and related
	// object into one series).
	Related client.Object
}

// Patch is a merge patch of an object the job owns (its pods' labels).
type Patch struct {
	Object client.Object
	Data   []byte
}

// Outcome is what a kind's status step decided about the job: its new
// status, the events that follow from the change, what to delete and patch,
// and when to look again. When the status is written, what syncing did is
// told, metrics are recorded and errors retried is the framework's (Decide).
type Outcome struct {
	// Job is a copy of the job with its new status (nil: nothing to write).
	Job client.Object
	// Events follow from the status change; they go out once it is written
	// (a held or deferred change sends them from the pass that writes it).
	Events []Event
	// Delete lists objects to delete (with a UID precondition), in order
	// (pods by cleanPodPolicy); the framework adds a JobSet past its
	// deadline first and the job itself past its TTL last (then no status
	// is written).
	Delete []client.Object
	// Patches are applied before the status is written.
	Patches []Patch
	// Requeue asks for a pass after this long (0: only on events).
	Requeue time.Duration
}

// What a kind may add to the framework's rules, each an optional interface of
// its Adapter (as Kueue's jobframework does it).
type (
	// SyncEventer is a kind with events of its own about what syncing did
	// (a PyTorchJob's warnings when its JobSet is created). They go out with
	// the framework's (JobSetCreated, ...), from the pass that synced.
	SyncEventer interface {
		SyncEvents(job client.Object, sync Sync) []Event
	}
	// CountsJudge is a kind whose status has counts that may be written late:
	// CountsOnly reports that updated differs from old in such counts only,
	// so the write may wait Delays.CountsDelay.
	CountsJudge interface {
		CountsOnly(old, updated client.Object) bool
	}
	// Deferrer is a kind whose status write may have to wait for another
	// controller that is between two writes of the job (Kueue starting a
	// TrainJob): DeferStatus says for at most how long (0: no wait).
	Deferrer interface {
		DeferStatus(old, updated client.Object) time.Duration
	}
	// InputReader is a kind whose plan needs objects besides the job and its
	// children (a TrainJob's runtime, a PriorityClass its checks look up).
	// ReadInputs reads them, as part of observing, into obs.Inputs: nothing
	// of a pass reads after observing. An error the plan should report goes
	// into obs.Inputs; a returned error ends the pass (retried).
	InputReader interface {
		ReadInputs(ctx context.Context, r client.Reader, job client.Object, obs *observe.Observed) error
	}
	// Recorder is a kind with metrics. RecordSync is called by every pass
	// that gets past its status step, whether it writes the status or defers
	// it; RecordStatus once the status is written (or found unchanged):
	// updated is the Outcome's Job, nil when it has none. Metrics of a
	// change follow from old and updated, so a held change is counted once,
	// by the pass that writes it.
	Recorder interface {
		RecordSync(job client.Object, sync Sync, now time.Time)
		RecordStatus(old, updated client.Object, now time.Time)
	}
)
