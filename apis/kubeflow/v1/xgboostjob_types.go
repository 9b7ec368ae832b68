package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// XGBoostJob names and defaults, as training-operator v1.9 defines them.
const (
	XGBoostJobKind = "XGBoostJob"

	// XGBoostJobDefaultContainerName is the container that gets the port and
	// that every replica must have.
	XGBoostJobDefaultContainerName = "xgboost"
	// XGBoostJobDefaultPortName names the port of the master (the Rabit
	// tracker) and of the workers.
	XGBoostJobDefaultPortName = "xgboostjob-port"
	// XGBoostJobDefaultPort is the port added when the container has none named
	// XGBoostJobDefaultPortName.
	XGBoostJobDefaultPort int32 = 9999
	// XGBoostJobDefaultRestartPolicy is the restart policy of a replica that sets none.
	XGBoostJobDefaultRestartPolicy = RestartPolicyNever

	// XGBoostJobReplicaTypeMaster is rank 0, which runs the tracker; exactly one pod.
	XGBoostJobReplicaTypeMaster ReplicaType = "Master"
	// XGBoostJobReplicaTypeWorker is the role of every other pod.
	XGBoostJobReplicaTypeWorker ReplicaType = "Worker"

	// XGBoostJobOperatorName is the value of OperatorNameLabel on every pod and
	// Service of an XGBoostJob, as training-operator v1.9 set it.
	XGBoostJobOperatorName = "xgboostjob-controller"
)

// XGBoostJob runs distributed XGBoost: one Master pod (rank 0, which runs the
// Rabit tracker) and Worker pods, each given MASTER_ADDR, MASTER_PORT,
// WORLD_SIZE and RANK.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.conditions[-1:].type`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type XGBoostJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what the user asks for.
	Spec XGBoostJobSpec `json:"spec,omitempty"`

	// status is what the controller observed.
	Status JobStatus `json:"status,omitempty"`
}

// XGBoostJobList is a list of XGBoostJobs.
//
// +kubebuilder:object:root=true
type XGBoostJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []XGBoostJob `json:"items"`
}

func init() { register(&XGBoostJob{}, &XGBoostJobList{}) }

// XGBoostJobSpec is the desired state of an XGBoostJob.
type XGBoostJobSpec struct {
	// runPolicy holds clean-up, deadline, retry and suspension policies.
	// +kubebuilder:validation:Optional
	RunPolicy RunPolicy `json:"runPolicy"`

	// xgbReplicaSpecs maps each role ("Master", "Worker") to its pods.
	XGBReplicaSpecs map[ReplicaType]*ReplicaSpec `json:"xgbReplicaSpecs"`
}

// ReplicaSpecs returns the job's replica specs (the kubeflow.org/v1 kinds'
// common accessor).
func (j *XGBoostJob) ReplicaSpecs() map[ReplicaType]*ReplicaSpec { return j.Spec.XGBReplicaSpecs }

// JobRunPolicy returns the job's run policy.
func (j *XGBoostJob) JobRunPolicy() *RunPolicy { return &j.Spec.RunPolicy }

// JobStatus returns the job's status.
func (j *XGBoostJob) JobStatus() *JobStatus { return &j.Status }
