package trainjob

// Names Trainyard adds to the objects it owns. They are Trainyard's own
// (additive), not part of the Kubeflow API.
const (
	// SnapshotAnnotation on a JobSet holds the runtime it was rendered from, so
	// that later edits of the runtime never change this TrainJob.
	SnapshotAnnotation = "trainyard.io/runtime-snapshot"
)

// Event reasons.
const (
	EventJobSetCreated     = "JobSetCreated"
	EventRunning           = "Running"
	EventJobSetUpdated     = "JobSetUpdated"
	EventJobSetRecreated   = "JobSetRecreated"
	EventSuspended         = "Suspended"
	EventResumed           = "Resumed"
	EventCompleted         = "Completed"
	EventFailed            = "Failed"
	EventBuildFailed       = "BuildFailed"
	EventApplyFailed       = "ApplyFailed"
	EventRuntimeNotFound   = "RuntimeNotFound"
	EventDeadlineExceeded  = "DeadlineExceeded"
	EventJobSetNotOwned    = "JobSetNotOwned"
	EventRuntimeNotSupport = "RuntimeNotSupported"
	EventKindNotServed     = "ChildKindNotServed"
)
