package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The OptimizationJob API is Kubeflow Trainer's (KEP-2605, v2.4): the same
// fields, defaults, enums and CEL rules, so that upstream's YAML and the
// Kubeflow SDK's optimizer work unchanged. Trainyard adds, in status only,
// trial counts and the best objective value (for kubectl get and the CLI).

// ObjectiveDirection says whether the objective metric is to be made as large
// or as small as possible.
// +kubebuilder:validation:Enum=Maximize;Minimize
type ObjectiveDirection string

// Objective directions.
const (
	ObjectiveDirectionMaximize ObjectiveDirection = "Maximize"
	ObjectiveDirectionMinimize ObjectiveDirection = "Minimize"
)

// OptimizationJob searches hyperparameters: it runs trials, each a TrainJob
// made from spec.trainJobTemplate with one assignment of spec.parameters, and
// reports the trial whose objective metric was best in status.result.
// The whole spec is immutable.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=trainer,shortName=optjob
// +kubebuilder:printcolumn:name="Done",type=integer,JSONPath=`.status.trialsFinished`,description="Trials finished (succeeded or failed)"
// +kubebuilder:printcolumn:name="Trials",type=integer,JSONPath=`.spec.numTrials`,description="Trials to run"
// +kubebuilder:printcolumn:name="Running",type=integer,JSONPath=`.status.trialsRunning`,description="Trials created and not finished"
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.trialsFailed`,description="Trials that failed"
// +kubebuilder:printcolumn:name="Best",type=string,JSONPath=`.status.result.objectiveValue`,description="Best value of the objective metric so far"
// +kubebuilder:printcolumn:name="Best Trial",type=string,JSONPath=`.status.result.trainJobName`,description="TrainJob of the best trial so far"
// +kubebuilder:printcolumn:name="Complete",type=string,JSONPath=`.status.conditions[?(@.type=="Complete")].status`,description="True once every trial finished and one succeeded"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Metric",type=string,JSONPath=`.spec.objectives[0].metric`,priority=1
// +kubebuilder:printcolumn:name="Direction",type=string,JSONPath=`.spec.objectives[0].direction`,priority=1
type OptimizationJob struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the search to run: objective, algorithm, parameters, trial
	// budget and the TrainJob each trial runs. Immutable.
	// +required
	Spec OptimizationJobSpec `json:"spec,omitempty,omitzero"`

	// status is what Trainyard observed of the trials.
	// +optional
	Status *OptimizationJobStatus `json:"status,omitempty,omitzero"`
}

// OptimizationJobList is a list of OptimizationJobs.
//
// +kubebuilder:object:root=true
type OptimizationJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the OptimizationJobs.
	Items []OptimizationJob `json:"items"`
}

// OptimizationJobSpec is the search an OptimizationJob runs.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="OptimizationJobSpec is immutable and cannot be updated after creation"
// +kubebuilder:validation:XValidation:rule="self.parallelTrials <= self.numTrials",message="parallelTrials cannot exceed numTrials"
// +kubebuilder:validation:XValidation:rule="!has(self.searchAlgorithm.grid) || self.parameters.all(p, has(p.searchSpace.categorical))",message="Grid search requires all parameters to be Categorical; Uniform and LogUniform are not supported."
type OptimizationJobSpec struct {
	// objectives name the metric to optimize (exactly one) and its direction.
	// +listType=map
	// +listMapKey=metric
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1
	// +required
	Objectives []Objective `json:"objectives,omitempty"`

	// searchAlgorithm picks each trial's parameters: random (optionally
	// seeded) or grid. Defaults to random.
	// +kubebuilder:default={random: {}}
	// +optional
	SearchAlgorithm *SearchAlgorithm `json:"searchAlgorithm,omitempty"`

	// parameters are the hyperparameters to search, each with its search space.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	// +required
	Parameters []Parameter `json:"parameters,omitempty"`

	// numTrials is how many trials to run in all (grid search runs at most one per combination).
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	NumTrials int32 `json:"numTrials,omitempty"`

	// parallelTrials is how many trials may run at once. Defaults to 1.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	ParallelTrials int32 `json:"parallelTrials,omitempty"`

	// trainJobTemplate is the TrainJob each trial runs, with the trial's
	// parameters added as environment variables of its trainer.
	// +required
	TrainJobTemplate TrainJobTemplateSpec `json:"trainJobTemplate,omitzero"`
}

// Objective is the metric a search optimizes.
type Objective struct {
	// metric is the name of the metric the trainer reports (status.trainerStatus.metrics of each trial).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +required
	Metric string `json:"metric,omitempty"`

	// direction says whether the best trial has the largest (Maximize) or smallest (Minimize) value. Defaults to Minimize.
	// +kubebuilder:default=Minimize
	// +optional
	Direction ObjectiveDirection `json:"direction,omitempty"`
}

// SearchAlgorithm is how trials' parameters are chosen: exactly one of random or grid.
// +kubebuilder:validation:ExactlyOneOf=random;grid
type SearchAlgorithm struct {
	// random samples each parameter independently from its search space.
	// +optional
	Random *RandomAlgorithm `json:"random,omitempty"`

	// grid runs every combination of the (categorical) parameters' choices, in order.
	// +optional
	Grid *GridAlgorithm `json:"grid,omitempty"`
}

// RandomAlgorithm is random search.
type RandomAlgorithm struct {
	// seed makes the search reproducible: the same seed gives the same trials.
	// Without one, Trainyard seeds from the OptimizationJob's UID.
	// +optional
	Seed *int64 `json:"seed,omitempty"`
}

// GridAlgorithm is grid search; it has no settings.
type GridAlgorithm struct{}

// SearchSpace is where one parameter's values come from: exactly one of
// uniform, logUniform or categorical.
// +kubebuilder:validation:ExactlyOneOf=uniform;logUniform;categorical
type SearchSpace struct {
	// uniform samples evenly between min and max.
	// +optional
	Uniform UniformSpace `json:"uniform,omitempty,omitzero"`

	// logUniform samples evenly between the logarithms of min and max (learning rates).
	// +optional
	LogUniform LogUniformSpace `json:"logUniform,omitempty,omitzero"`

	// categorical picks one of a list of strings.
	// +optional
	Categorical CategoricalSpace `json:"categorical,omitempty,omitzero"`
}

// Double is a decimal number written as a string (it keeps its precision through JSON).
// +kubebuilder:validation:Pattern="^-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?$"
// +kubebuilder:validation:MaxLength=64
type Double string

// UniformSpace is the range [min, max], sampled evenly.
// +kubebuilder:validation:XValidation:rule="double(self.min) < double(self.max)",message="min must be strictly less than max"
type UniformSpace struct {
	// min is the smallest value, a decimal number as a string.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MinLength=1
	// +required
	Min Double `json:"min,omitempty"`

	// max is the largest value, a decimal number as a string.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MinLength=1
	// +required
	Max Double `json:"max,omitempty"`

	// type is Int (whole numbers in the range) or Float. Defaults to Float.
	// +kubebuilder:default=Float
	// +optional
	Type ParameterType `json:"type,omitempty"`
}

// LogUniformSpace is the range [min, max] (min > 0), sampled evenly in log space.
// +kubebuilder:validation:XValidation:rule="double(self.min) > 0.0",message="min must be strictly greater than 0"
// +kubebuilder:validation:XValidation:rule="double(self.min) < double(self.max)",message="min must be strictly less than max"
type LogUniformSpace struct {
	// min is the smallest value, above 0, a decimal number as a string.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MinLength=1
	// +required
	Min Double `json:"min,omitempty"`

	// max is the largest value, a decimal number as a string.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MinLength=1
	// +required
	Max Double `json:"max,omitempty"`

	// type is Int (sampled values rounded to whole numbers) or Float. Defaults to Float.
	// +kubebuilder:default=Float
	// +optional
	Type ParameterType `json:"type,omitempty"`
}

// ParameterType is the type of a numeric parameter's values.
// +kubebuilder:validation:Enum=Int;Float
type ParameterType string

// Parameter types.
const (
	ParameterTypeInt   ParameterType = "Int"
	ParameterTypeFloat ParameterType = "Float"
)

// CategoricalSpace is a set of unordered strings to choose from.
type CategoricalSpace struct {
	// choices are the values to choose from.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MaxLength=64
	// +listType=set
	// +required
	Choices []string `json:"choices,omitempty"`
}

// Parameter is one hyperparameter to search.
type Parameter struct {
	// name of the hyperparameter: letters, digits and underscores, not starting with a digit. Trials get it as the environment variable KUBEFLOW_TRAINER_OPT_<NAME in upper case>.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern="^[A-Za-z_][A-Za-z0-9_]*$"
	// +required
	Name string `json:"name,omitempty"`

	// searchSpace is where the parameter's values come from.
	// +required
	SearchSpace *SearchSpace `json:"searchSpace,omitempty"`
}

// ParameterAssignment is one hyperparameter's value in a trial.
type ParameterAssignment struct {
	// name of the hyperparameter.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +required
	Name string `json:"name,omitempty"`

	// value of the hyperparameter in the trial, as a string.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +required
	Value string `json:"value,omitempty"`
}

// TrainJobTemplateSpec is the TrainJob every trial runs.
type TrainJobTemplateSpec struct {
	// metadata are labels and annotations every trial gets (a Kueue queue
	// label reaches every trial); the trials' names and namespace are the
	// OptimizationJob's to choose.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.name) && !has(self.namespace)", message="name and namespace cannot be set in a template."
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the TrainJob's spec.
	// +required
	Spec TrainJobSpec `json:"spec,omitzero"`
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &OptimizationJob{}, &OptimizationJobList{})
		return nil
	})
}
