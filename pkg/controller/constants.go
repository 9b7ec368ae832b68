package controller

// Names Trainyard adds to the objects it owns. They are Trainyard's own
// (additive), not part of the Kubeflow API.
const (
	// FieldOwner is the field manager of every write Trainyard makes.
	FieldOwner = "trainyard"

	// SnapshotAnnotation on a JobSet holds the runtime it was rendered from, so
	// that later edits of the runtime never change this TrainJob.
	SnapshotAnnotation = "trainyard.io/runtime-snapshot"
	// RenderHashAnnotation is the hash of the whole rendered JobSet: equal means
	// nothing to apply.
	RenderHashAnnotation = "trainyard.io/render-hash"
	// TemplateHashAnnotation is the hash of the parts of the JobSet that JobSet
	// never lets change, even while suspended: different means recreate.
	TemplateHashAnnotation = "trainyard.io/template-hash"

	// runtimeRefIndex indexes TrainJobs by "<kind>/<name>" of their runtime.
	runtimeRefIndex = "spec.runtimeRef"
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
)
