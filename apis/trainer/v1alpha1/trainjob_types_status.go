package v1alpha1

// A TrainJob's observed state (status) and its phases.
//
// The file name sorts after trainjob_types.go on purpose: controller-gen names the
// imports of zz_generated.deepcopy.go in the order it meets the types (files by
// name), and core/v1 must be met before meta/v1 for the output to stay as it is.

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TrainJobPhase is a one-word summary of a TrainJob's state, for people and
// printer columns. Programs should read the conditions.
// +kubebuilder:validation:Enum=Pending;Running;Suspended;Complete;Failed
type TrainJobPhase string

const (
	// TrainJobPending means not all training nodes are running yet (waiting for the JobSet, quota or pods).
	TrainJobPending TrainJobPhase = "Pending"
	// TrainJobRunning means every training node is running.
	TrainJobRunning TrainJobPhase = "Running"
	// TrainJobSuspendedPhase means spec.suspend is true and the pods are gone or going.
	TrainJobSuspendedPhase TrainJobPhase = "Suspended"
	// TrainJobCompletePhase means the job finished successfully.
	TrainJobCompletePhase TrainJobPhase = "Complete"
	// TrainJobFailedPhase means the job finished unsuccessfully.
	TrainJobFailedPhase TrainJobPhase = "Failed"
)

// TrainJobStatus is the observed state of a TrainJob.
type TrainJobStatus struct {
	// conditions: Suspended, Complete and Failed (public), and Created (Trainyard).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// jobsStatus counts the jobs of each replicated job, copied from the JobSet.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	JobsStatus []JobStatus `json:"jobsStatus,omitempty"`

	// trainerStatus is progress reported by the training code through the
	// manager's status server (Kubeflow Trainer v2.3), field manager trainer-status.
	// +optional
	TrainerStatus *TrainerStatus `json:"trainerStatus,omitempty"`

	// phase summarises the state in one word (Trainyard, additive).
	// +optional
	Phase TrainJobPhase `json:"phase,omitempty"`

	// reason is a CamelCase word for why the TrainJob is in its phase, e.g.
	// WaitingForPods, ImagePullBackOff, Unschedulable, RuntimeNotFound (Trainyard, additive).
	// +optional
	Reason string `json:"reason,omitempty"`

	// message explains reason for people (Trainyard, additive).
	// +optional
	Message string `json:"message,omitempty"`

	// numNodes is the number of training nodes the job runs (Trainyard, additive).
	// +optional
	NumNodes *int32 `json:"numNodes,omitempty"`

	// readyNodes is the number of training nodes whose pod is running and ready (Trainyard, additive).
	// +optional
	ReadyNodes *int32 `json:"readyNodes,omitempty"`

	// restarts counts how often the JobSet's failure policy restarted the
	// job's pods, e.g. after a node was lost (Trainyard, additive).
	// +optional
	Restarts int32 `json:"restarts,omitempty"`

	// startTime is when every training node was first running, since the last
	// resume (Trainyard, additive).
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// completionTime is when the job completed or failed (Trainyard, additive).
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
}

// JobStatus counts the jobs of one replicated job.
type JobStatus struct {
	// name of the replicated job.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// ready jobs.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Ready *int32 `json:"ready,omitempty"`
	// succeeded jobs.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Succeeded *int32 `json:"succeeded,omitempty"`
	// failed jobs.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Failed *int32 `json:"failed,omitempty"`
	// active jobs.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Active *int32 `json:"active,omitempty"`
	// suspended jobs.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Suspended *int32 `json:"suspended,omitempty"`
}

// TrainerStatus is training progress reported by the training code.
// +kubebuilder:validation:XValidation:rule="has(self.lastUpdatedTime)", message="lastUpdatedTime is required when trainerStatus is present"
type TrainerStatus struct {
	// progressPercentage is how far training is, 0 to 100, as the trainer reported it.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	ProgressPercentage *int32 `json:"progressPercentage,omitempty"`
	// estimatedRemainingSeconds is the trainer's estimate of the time left.
	// +optional
	// +kubebuilder:validation:Minimum=0
	EstimatedRemainingSeconds *int32 `json:"estimatedRemainingSeconds,omitempty"`
	// metrics are the latest values the trainer reported (loss, accuracy, ...).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	Metrics []Metric `json:"metrics,omitempty"`
	// lastUpdatedTime is when the trainer last reported.
	// +optional
	LastUpdatedTime metav1.Time `json:"lastUpdatedTime,omitzero"`
}

// Metric is one named training metric.
type Metric struct {
	// name of the metric, e.g. loss.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Name string `json:"name,omitempty"`
	// value of the metric, as the trainer wrote it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Value string `json:"value,omitempty"`
}
