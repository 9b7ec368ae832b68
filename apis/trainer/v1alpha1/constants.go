package v1alpha1

// Names that runtimes, users and other tools (the Kubeflow SDK, Kueue) rely on.
// They are part of the public contract and must not change.
const (
	// TrainJobKind, TrainingRuntimeKind and ClusterTrainingRuntimeKind are the kinds of this group.
	TrainJobKind               = "TrainJob"
	TrainingRuntimeKind        = "TrainingRuntime"
	ClusterTrainingRuntimeKind = "ClusterTrainingRuntime"

	// TrainJobControllerName is the spec.managedBy value of TrainJobs that
	// Trainyard reconciles; it is also the default.
	TrainJobControllerName = "trainer.kubeflow.org/trainjob-controller"
	// MultiKueueControllerName is the spec.managedBy value of TrainJobs that
	// Kueue's MultiKueue dispatches to worker clusters; Trainyard leaves them alone.
	MultiKueueControllerName = "kueue.x-k8s.io/multikueue"

	// AncestorLabel on a replicated job's template binds TrainJob fields to it.
	AncestorLabel = "trainer.kubeflow.org/trainjob-ancestor-step"
	// AncestorTrainer marks the replicated job that runs the training nodes.
	AncestorTrainer = "trainer"
	// AncestorDatasetInitializer and AncestorModelInitializer mark the initializer jobs.
	AncestorDatasetInitializer = "dataset-initializer"
	AncestorModelInitializer   = "model-initializer"

	// NodeContainer is the container of the trainer job that spec.trainer configures.
	NodeContainer = "node"
	// DatasetInitializerContainer and ModelInitializerContainer are the containers
	// that spec.initializer configures.
	DatasetInitializerContainer = "dataset-initializer"
	ModelInitializerContainer   = "model-initializer"

	// FrameworkLabel names a runtime's framework; the Kubeflow SDK lists only runtimes that carry it.
	FrameworkLabel = "trainer.kubeflow.org/framework"

	// ContainerTrainerPort is the torchrun rendezvous (master) port.
	ContainerTrainerPort int32 = 29500
)

// Condition types. Suspended, Complete and Failed are the public Kubeflow Trainer
// conditions; Created is Trainyard's additive condition that carries build and
// apply errors so that they are visible in status, not only in events.
const (
	TrainJobSuspended = "Suspended"
	TrainJobComplete  = "Complete"
	TrainJobFailed    = "Failed"
	TrainJobCreated   = "Created"
)

// Condition reasons set by Trainyard (the JobSet's own reasons are copied verbatim
// into Complete and Failed).
const (
	TrainJobSuspendedReason = "Suspended"
	TrainJobResumedReason   = "Resumed"

	TrainJobRuntimeNotSupportedReason = "TrainingRuntimeNotSupported"
	TrainJobDeadlineExceededReason    = "DeadlineExceeded"

	TrainJobCreatedReason       = "JobSetCreated"
	TrainJobRuntimeNotFound     = "RuntimeNotFound"
	TrainJobBuildFailedReason   = "BuildFailed"
	TrainJobApplyFailedReason   = "ApplyFailed"
	TrainJobJobSetDeletedReason = "JobSetDeleted"
	// TrainJobJobSetNotOwnedReason: a JobSet of the TrainJob's name belongs to
	// someone else.
	TrainJobJobSetNotOwnedReason = "JobSetNotOwned"
	// TrainJobChildKindNotServedReason: the runtime needs a kind whose CRD is
	// not installed.
	TrainJobChildKindNotServedReason = "ChildKindNotServed"
)
