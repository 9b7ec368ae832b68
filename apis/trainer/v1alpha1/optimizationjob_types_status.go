package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// OptimizationJobStatus is what Trainyard observed of an OptimizationJob's trials.
type OptimizationJobStatus struct {
	// conditions are Created, Running, Complete and Failed (every trial failed), with trial counts in their messages.
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=100
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// result is the best trial so far: its TrainJob and parameters.
	// +optional
	Result Result `json:"result,omitempty,omitzero"`

	// trialsCreated is how many trials (TrainJobs) were created. Trainyard's addition.
	// +optional
	// +kubebuilder:validation:Minimum=0
	TrialsCreated int32 `json:"trialsCreated,omitempty"`

	// trialsRunning is how many trials were created and have not finished. Trainyard's addition.
	// +optional
	// +kubebuilder:validation:Minimum=0
	TrialsRunning int32 `json:"trialsRunning,omitempty"`

	// trialsFinished is how many trials finished, succeeded or failed. Trainyard's addition.
	// +optional
	// +kubebuilder:validation:Minimum=0
	TrialsFinished int32 `json:"trialsFinished,omitempty"`

	// trialsSucceeded is how many trials completed. Trainyard's addition.
	// +optional
	// +kubebuilder:validation:Minimum=0
	TrialsSucceeded int32 `json:"trialsSucceeded,omitempty"`

	// trialsFailed is how many trials failed. Trainyard's addition.
	// +optional
	// +kubebuilder:validation:Minimum=0
	TrialsFailed int32 `json:"trialsFailed,omitempty"`

	// trials are the trials created so far, in order: each one's TrainJob, state and objective value. A trial's record stays when its TrainJob is deleted. Trainyard's addition.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	// +optional
	Trials []TrialStatus `json:"trials,omitempty"`
}

// TrialState is the state of one trial.
// +kubebuilder:validation:Enum=Running;Succeeded;Failed
type TrialState string

// Trial states.
const (
	// TrialRunning: the trial's TrainJob exists and has not finished (it may be queued or suspended).
	TrialRunning TrialState = "Running"
	// TrialSucceeded: the TrainJob completed.
	TrialSucceeded TrialState = "Succeeded"
	// TrialFailed: the TrainJob failed, or was deleted before it finished.
	TrialFailed TrialState = "Failed"
)

// TrialStatus is one trial as Trainyard last observed it.
type TrialStatus struct {
	// name of the trial's TrainJob.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	Name string `json:"name"`

	// state of the trial: Running, Succeeded or Failed.
	// +required
	State TrialState `json:"state"`

	// objectiveValue is the last value of the objective metric the trial reported (set once it succeeded).
	// +kubebuilder:validation:MaxLength=64
	// +optional
	ObjectiveValue string `json:"objectiveValue,omitempty"`

	// message says why a trial failed, or why a succeeded one has no objective value.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Message string `json:"message,omitempty"`
}

// Result is the best trial: the one whose objective metric was best by the objective's direction.
type Result struct {
	// trainJobName is the TrainJob of the best trial.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	TrainJobName string `json:"trainJobName,omitempty"`

	// parameters are the best trial's parameter values.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	// +optional
	Parameters []ParameterAssignment `json:"parameters,omitempty"`

	// objectiveValue is the best trial's objective metric, the last value it reported. Trainyard's addition.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	ObjectiveValue string `json:"objectiveValue,omitempty"`
}

// Names of the OptimizationJob's trials, conditions and reasons. The label,
// the env prefix and the annotation follow the controller proposed upstream
// (KEP-2605's follow-up); the rest are Trainyard's (docs/optimization.md).
const (
	// OptimizationJobKind is the kind of an OptimizationJob.
	OptimizationJobKind = "OptimizationJob"

	// OptimizationJobNameLabel on a trial's TrainJob names its OptimizationJob.
	OptimizationJobNameLabel = "trainer.kubeflow.org/optimizationjob-name"
	// TrialIndexAnnotation on a trial's TrainJob is its index (0, 1, ...).
	TrialIndexAnnotation = "trainer.kubeflow.org/trial-index"
	// TrialParametersAnnotation on a trial's TrainJob holds all its
	// parameters, as the JSON of a []ParameterAssignment.
	TrialParametersAnnotation = "trainer.kubeflow.org/optimization-parameters"
	// TrialParameterAnnotationPrefix + name is one parameter's value (for
	// every name that makes a valid annotation key).
	TrialParameterAnnotationPrefix = "trainer.kubeflow.org/opt-param-"
	// TrialParameterEnvPrefix + NAME (upper case) is one parameter's value
	// in the environment of the trial's trainer.
	TrialParameterEnvPrefix = "KUBEFLOW_TRAINER_OPT_"

	// OptimizationJob condition types: those of the controller proposed upstream.
	OptimizationJobCreated  = "Created"
	OptimizationJobRunning  = "Running"
	OptimizationJobComplete = "Complete"
	OptimizationJobFailed   = "Failed"

	// Condition reasons.
	OptimizationJobTrialsCreatedReason   = "TrialsCreated"
	OptimizationJobTrialsRunningReason   = "TrialsRunning"
	OptimizationJobTrialsFinishedReason  = "TrialsFinished"
	OptimizationJobAllTrialsFailedReason = "AllTrialsFailed"
	OptimizationJobInvalidSpecReason     = "InvalidSpec"
	OptimizationJobCreateFailedReason    = "TrialCreateFailed"
)
