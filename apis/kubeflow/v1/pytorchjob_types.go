package v1

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PyTorchJob names and defaults, as training-operator v1.9 defines them.
const (
	PyTorchJobKind = "PyTorchJob"

	// PyTorchJobDefaultContainerName is the container that gets the port and
	// that every replica must have.
	PyTorchJobDefaultContainerName = "pytorch"
	// PyTorchJobDefaultPortName names the port the master listens on (and the
	// elastic rendezvous, when no rdzvPort is given).
	PyTorchJobDefaultPortName = "pytorchjob-port"
	// PyTorchJobDefaultPort is the port added when the container has none named
	// PyTorchJobDefaultPortName.
	PyTorchJobDefaultPort int32 = 23456
	// PyTorchJobDefaultRestartPolicy is the restart policy of a replica that sets none.
	PyTorchJobDefaultRestartPolicy = RestartPolicyOnFailure

	// PyTorchJobReplicaTypeMaster is the rank-0 role; at most one pod.
	PyTorchJobReplicaTypeMaster ReplicaType = "Master"
	// PyTorchJobReplicaTypeWorker is the role of every other pod.
	PyTorchJobReplicaTypeWorker ReplicaType = "Worker"

	// PyTorchJobOperatorName is the value of OperatorNameLabel on every pod and
	// Service of a PyTorchJob, as training-operator v1.9 set it; Kueue's pod
	// selector for PyTorchJobs uses it, and so does the trainyard CLI.
	PyTorchJobOperatorName = "pytorchjob-controller"
)

// PyTorchJob runs a distributed PyTorch job: one optional Master pod and a set
// of Worker pods, each given the environment torch.distributed and torchrun read.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.pytorchReplicaSpecs.Worker.replicas,statuspath=.status.replicaStatuses.Worker.active,selectorpath=.status.replicaStatuses.Worker.selector
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.conditions[-1:].type`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PyTorchJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what the user asks for.
	Spec PyTorchJobSpec `json:"spec,omitempty"`

	// status is what the controller observed.
	Status JobStatus `json:"status,omitempty"`
}

// PyTorchJobList is a list of PyTorchJobs.
//
// +kubebuilder:object:root=true
type PyTorchJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PyTorchJob `json:"items"`
}

func init() { register(&PyTorchJob{}, &PyTorchJobList{}) }

// PyTorchJobSpec is the desired state of a PyTorchJob.
type PyTorchJobSpec struct {
	// runPolicy holds clean-up, deadline, retry and suspension policies.
	// +kubebuilder:validation:Optional
	RunPolicy RunPolicy `json:"runPolicy"`

	// elasticPolicy makes the job elastic: torchrun's rendezvous admits between
	// minReplicas and maxReplicas workers.
	// +optional
	ElasticPolicy *ElasticPolicy `json:"elasticPolicy,omitempty"`

	// pytorchReplicaSpecs maps each role ("Master", "Worker") to its pods.
	PyTorchReplicaSpecs map[ReplicaType]*ReplicaSpec `json:"pytorchReplicaSpecs"`

	// nprocPerNode is the number of processes per pod: "auto", "cpu", "gpu" or an
	// integer. Defaults to "auto".
	// +optional
	NprocPerNode *string `json:"nprocPerNode,omitempty"`
}

// ElasticPolicy configures torchrun's elastic rendezvous.
type ElasticPolicy struct {
	// minReplicas is the fewest workers the job runs with.
	// +optional
	MinReplicas *int32 `json:"minReplicas,omitempty"`
	// maxReplicas is the most workers the job runs with.
	// +optional
	MaxReplicas *int32 `json:"maxReplicas,omitempty"`
	// rdzvBackend is the rendezvous backend. Defaults to c10d.
	// +optional
	RDZVBackend *RDZVBackend `json:"rdzvBackend,omitempty"`
	// rdzvPort is the rendezvous port. Defaults to the workers' pytorchjob-port.
	// +optional
	RDZVPort *int32 `json:"rdzvPort,omitempty"`
	// rdzvHost is the rendezvous host. Defaults to <job>-worker-0.
	// +optional
	RDZVHost *string `json:"rdzvHost,omitempty"`
	// rdzvId is the rendezvous id.
	// +optional
	RDZVID *string `json:"rdzvId,omitempty"`
	// rdzvConf is passed to the rendezvous as key=value pairs.
	// +optional
	RDZVConf []RDZVConf `json:"rdzvConf,omitempty"`
	// standalone starts a local rendezvous (torchrun --standalone).
	// +optional
	Standalone *bool `json:"standalone,omitempty"`
	// Deprecated: use spec.nprocPerNode.
	// +optional
	NProcPerNode *int32 `json:"nProcPerNode,omitempty"`
	// maxRestarts is torchrun's --max-restarts.
	// +optional
	MaxRestarts *int32 `json:"maxRestarts,omitempty"`
	// metrics would drive a HorizontalPodAutoscaler; Trainyard accepts them but
	// creates no autoscaler.
	// +optional
	Metrics []autoscalingv2.MetricSpec `json:"metrics,omitempty"`
}

// RDZVConf is one rendezvous setting.
type RDZVConf struct {
	// key of a rendezvous option (torchrun --rdzv-conf).
	// +optional
	Key string `json:"key,omitempty"`
	// value of the rendezvous option.
	// +optional
	Value string `json:"value,omitempty"`
}

// RDZVBackend is a torchrun rendezvous backend.
// +kubebuilder:validation:Enum=c10d;etcd;etcd-v2
type RDZVBackend string

// Rendezvous backends.
const (
	BackendC10D   RDZVBackend = "c10d"
	BackendETCD   RDZVBackend = "etcd"
	BackendETCDV2 RDZVBackend = "etcd-v2"
)
