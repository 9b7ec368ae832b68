package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MPIJob names and defaults, as training-operator v1.9 defines them.
const (
	MPIJobKind = "MPIJob"

	// MPIJobDefaultContainerName is the launcher container that gets v1's
	// MPI environment when spec.mainContainer is not set.
	MPIJobDefaultContainerName = "mpi"
	// MPIJobDefaultRestartPolicy is the restart policy of a replica that sets none.
	MPIJobDefaultRestartPolicy = RestartPolicyNever

	// MPIJobReplicaTypeLauncher runs mpirun; exactly one pod.
	MPIJobReplicaTypeLauncher ReplicaType = "Launcher"
	// MPIJobReplicaTypeWorker is the role of the pods mpirun starts the ranks on.
	MPIJobReplicaTypeWorker ReplicaType = "Worker"

	// MPIJobOperatorName is the value of OperatorNameLabel on every pod of an
	// MPIJob, as training-operator v1.9 set it.
	MPIJobOperatorName = "mpijob-controller"
)

// MPIJob runs an MPI program: one Launcher pod runs mpirun, which starts the
// ranks on the Worker pods listed in the hostfile (/etc/mpi/hostfile).
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.mpiReplicaSpecs.Worker.replicas,statuspath=.status.replicaStatuses.Worker.active,selectorpath=.status.replicaStatuses.Worker.selector
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.conditions[-1:].type`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MPIJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what the user asks for.
	Spec MPIJobSpec `json:"spec,omitempty"`

	// status is what the controller observed.
	Status JobStatus `json:"status,omitempty"`
}

// MPIJobList is a list of MPIJobs.
//
// +kubebuilder:object:root=true
type MPIJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MPIJob `json:"items"`
}

func init() { register(&MPIJob{}, &MPIJobList{}) }

// MPIJobSpec is the desired state of an MPIJob.
type MPIJobSpec struct {
	// slotsPerWorker is the number of slots (ranks) of each worker in the
	// hostfile. Defaults to 1.
	// +optional
	SlotsPerWorker *int32 `json:"slotsPerWorker,omitempty"`

	// cleanPodPolicy says which pods are deleted when the job finishes.
	// Deprecated: use runPolicy.cleanPodPolicy; this one wins when both are set, as in v1.
	// +optional
	CleanPodPolicy *CleanPodPolicy `json:"cleanPodPolicy,omitempty"`

	// mpiReplicaSpecs maps each role ("Launcher", "Worker") to its pods.
	MPIReplicaSpecs map[ReplicaType]*ReplicaSpec `json:"mpiReplicaSpecs"`

	// mainContainer is the name of the launcher container that runs mpirun
	// and gets the MPI environment. Defaults to "mpi"; without such a
	// container, the first one.
	// +optional
	MainContainer string `json:"mainContainer,omitempty"`

	// runPolicy holds clean-up, deadline, retry and suspension policies.
	// +kubebuilder:validation:Optional
	RunPolicy RunPolicy `json:"runPolicy"`
}

// ReplicaSpecs returns the job's replica specs (the kubeflow.org/v1 kinds'
// common accessor).
func (j *MPIJob) ReplicaSpecs() map[ReplicaType]*ReplicaSpec { return j.Spec.MPIReplicaSpecs }

// JobRunPolicy returns the job's run policy.
func (j *MPIJob) JobRunPolicy() *RunPolicy { return &j.Spec.RunPolicy }

// JobStatus returns the job's status.
func (j *MPIJob) JobStatus() *JobStatus { return &j.Status }
