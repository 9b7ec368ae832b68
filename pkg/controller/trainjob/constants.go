package trainjob

import (
	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
)

// Names Trainyard adds to the objects it owns. They are Trainyard's own
// (additive), not part of the Kubeflow API.
const (
	// SnapshotAnnotation on a JobSet holds the runtime it was rendered from, so
	// that later edits of the runtime never change this TrainJob.
	SnapshotAnnotation = "trainyard.io/runtime-snapshot"
)

// Event reasons.
const (
	EventJobSetCreated     = jobframework.EventJobSetCreated
	EventRunning           = "Running"
	EventJobSetUpdated     = jobframework.EventJobSetUpdated
	EventJobSetRecreated   = jobframework.EventJobSetRecreated
	EventSuspended         = "Suspended"
	EventResumed           = "Resumed"
	EventCompleted         = "Completed"
	EventFailed            = "Failed"
	EventBuildFailed       = "BuildFailed"
	EventApplyFailed       = "ApplyFailed"
	EventRuntimeNotFound   = "RuntimeNotFound"
	EventDeadlineExceeded  = "DeadlineExceeded"
	EventJobSetNotOwned    = jobframework.EventJobSetNotOwned
	EventRuntimeNotSupport = trainer.TrainJobRuntimeNotSupportedReason
	EventKindNotServed     = trainer.TrainJobChildKindNotServedReason
)
