package v1alpha1

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// ClusterTrainingRuntime is a cluster-wide template for TrainJobs.
//
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,categories=trainer,shortName=ctr
// +kubebuilder:printcolumn:name="Framework",type=string,JSONPath=`.metadata.labels.trainer\.kubeflow\.org/framework`
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.spec.mlPolicy.numNodes`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterTrainingRuntime struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the template.
	// +optional
	Spec TrainingRuntimeSpec `json:"spec,omitzero"`
}

// ClusterTrainingRuntimeList is a list of ClusterTrainingRuntimes.
//
// +kubebuilder:object:root=true
type ClusterTrainingRuntimeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterTrainingRuntime `json:"items"`
}

// TrainingRuntime is a namespaced template for TrainJobs in its namespace.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=trainer,shortName=tr
// +kubebuilder:printcolumn:name="Framework",type=string,JSONPath=`.metadata.labels.trainer\.kubeflow\.org/framework`
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.spec.mlPolicy.numNodes`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type TrainingRuntime struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the template.
	// +optional
	Spec TrainingRuntimeSpec `json:"spec,omitzero"`
}

// TrainingRuntimeList is a list of TrainingRuntimes.
//
// +kubebuilder:object:root=true
type TrainingRuntimeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TrainingRuntime `json:"items"`
}

// TrainingRuntimeSpec is a TrainJob template: an ML policy that decides the
// distributed environment, an optional gang-scheduling policy, and the JobSet to run.
type TrainingRuntimeSpec struct {
	// mlPolicy decides the node count and the framework's distributed environment.
	// +optional
	MLPolicy *MLPolicy `json:"mlPolicy,omitempty"`

	// podGroupPolicy asks for gang scheduling of the job's pods.
	// +optional
	PodGroupPolicy *PodGroupPolicy `json:"podGroupPolicy,omitempty"`

	// template is the JobSet that each TrainJob starts from.
	// +required
	Template JobSetTemplateSpec `json:"template,omitzero"`
}

// JobSetTemplateSpec is a JobSet's metadata and spec.
type JobSetTemplateSpec struct {
	// metadata labels and annotations are copied to the JobSet.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the JobSet spec.
	// +optional
	Spec jobsetv1alpha2.JobSetSpec `json:"spec,omitempty"`
}

// PodGroupPolicy chooses a gang-scheduling mechanism.
type PodGroupPolicy struct {
	PodGroupPolicySource `json:",inline"`
}

// PodGroupPolicySource holds one gang-scheduling mechanism.
type PodGroupPolicySource struct {
	// coscheduling uses the scheduler-plugins coscheduling PodGroup.
	// +optional
	Coscheduling *CoschedulingPodGroupPolicySource `json:"coscheduling,omitempty"`
	// volcano uses a Volcano PodGroup.
	// +optional
	Volcano *VolcanoPodGroupPolicySource `json:"volcano,omitempty"`
}

// CoschedulingPodGroupPolicySource configures coscheduling.
type CoschedulingPodGroupPolicySource struct {
	// scheduleTimeoutSeconds is how long the gang may wait to be scheduled.
	// +optional
	// +kubebuilder:default=60
	ScheduleTimeoutSeconds *int32 `json:"scheduleTimeoutSeconds,omitempty"`
}

// VolcanoPodGroupPolicySource configures Volcano.
type VolcanoPodGroupPolicySource struct {
	// networkTopology constrains the gang's placement in the network.
	// +optional
	NetworkTopology *NetworkTopologySpec `json:"networkTopology,omitempty"`
}

// NetworkTopologySpec is Volcano's network-topology constraint (same wire shape).
type NetworkTopologySpec struct {
	// mode is hard or soft.
	// +optional
	// +kubebuilder:validation:Enum=hard;soft
	Mode string `json:"mode,omitempty"`
	// highestTierAllowed is the highest network tier the gang may span.
	// +optional
	HighestTierAllowed *int `json:"highestTierAllowed,omitempty"`
}

// MLPolicy decides the node count and the distributed environment.
//
// +kubebuilder:validation:XValidation:rule="[has(self.torch), has(self.mpi), has(self.jax), has(self.xgboost), has(self.flux)].filter(x, x).size() <= 1", message="only one of torch, mpi, jax, xgboost or flux can be set"
// +kubebuilder:validation:XValidation:rule="!(has(self.numNodes) && has(self.torch) && has(self.torch.elasticPolicy))", message="numNodes must not be set when torch.elasticPolicy is set"
type MLPolicy struct {
	// numNodes is the default number of training nodes; TrainJobs may override it. Defaults to 1.
	// +optional
	// +kubebuilder:validation:Minimum=1
	NumNodes *int32 `json:"numNodes,omitempty"`

	MLPolicySource `json:",inline"`
}

// MLPolicySource holds at most one framework policy.
type MLPolicySource struct {
	// torch runs the trainer with torchrun's environment (PET_*).
	// +optional
	Torch *TorchMLPolicySource `json:"torch,omitempty"`
	// mpi runs the trainer with MPI.
	// +optional
	MPI *MPIMLPolicySource `json:"mpi,omitempty"`
	// jax runs the trainer with JAX's distributed environment.
	// +optional
	JAX *JAXMLPolicySource `json:"jax,omitempty"`
	// xgboost runs the trainer with XGBoost's collective environment.
	// +optional
	XGBoost *XGBoostMLPolicySource `json:"xgboost,omitempty"`
	// flux runs the trainer under Flux.
	// +optional
	Flux *FluxMLPolicySource `json:"flux,omitempty"`
}

// TorchMLPolicySource configures torchrun.
type TorchMLPolicySource struct {
	// numProcPerNode is the default processes per node: an integer >= 1, or auto, cpu, gpu (v2.1 shape).
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : self in ['auto', 'cpu', 'gpu']", message="numProcPerNode must be an integer >= 1 or one of auto, cpu, gpu"
	NumProcPerNode *intstr.IntOrString `json:"numProcPerNode,omitempty"`

	// elasticPolicy makes the node count elastic between minNodes and maxNodes (v2.1 shape).
	// +optional
	ElasticPolicy *TorchElasticPolicy `json:"elasticPolicy,omitempty"`

	// envInjection also injects the PET_* variables into other containers (v2.3 shape).
	// +optional
	EnvInjection *EnvInjection `json:"envInjection,omitempty"`
}

// TorchElasticPolicy configures elastic torchrun.
type TorchElasticPolicy struct {
	// maxRestarts is torchrun's --max-restarts.
	// +optional
	MaxRestarts *int32 `json:"maxRestarts,omitempty"`
	// minNodes is the lower bound of the node count.
	// +optional
	MinNodes *int32 `json:"minNodes,omitempty"`
	// maxNodes is the upper bound of the node count.
	// +optional
	MaxNodes *int32 `json:"maxNodes,omitempty"`
	// metrics for autoscaling.
	// +optional
	// +listType=atomic
	Metrics []autoscalingv2.MetricSpec `json:"metrics,omitempty"`
}

// EnvInjection lists extra containers that also get the PET_* variables.
type EnvInjection struct {
	// targets are the containers, by job and name, that get the torch environment too.
	// +optional
	// +listType=map
	// +listMapKey=jobName
	// +kubebuilder:validation:MaxItems=16
	Targets []EnvInjectionTarget `json:"targets,omitempty"`
}

// EnvInjectionTarget names containers of one replicated job.
type EnvInjectionTarget struct {
	// jobName is the replicated job.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	JobName string `json:"jobName,omitempty"`
	// containerNames are containers of that job ("node" always gets the variables).
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="!self.exists(c, c == 'node')", message="containerNames must not include node: it always gets the PET_* variables"
	ContainerNames []string `json:"containerNames,omitempty"`
}

// MPIImplementation names an MPI implementation.
type MPIImplementation string

// MPIImplementationOpenMPI is the only implementation the public API defines a default for.
const MPIImplementationOpenMPI MPIImplementation = "OpenMPI"

// MPIMLPolicySource configures MPI.
type MPIMLPolicySource struct {
	// numProcPerNode is the number of MPI slots per node.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	NumProcPerNode *int32 `json:"numProcPerNode,omitempty"`
	// +optional
	// +kubebuilder:default=OpenMPI
	// +kubebuilder:validation:Enum=OpenMPI;""
	MPIImplementation *MPIImplementation `json:"mpiImplementation,omitempty"`
	// sshAuthMountPath is where the SSH keys are mounted in the MPI containers.
	// +optional
	// +kubebuilder:default="/root/.ssh"
	// +kubebuilder:validation:MaxLength=4096
	SSHAuthMountPath *string `json:"sshAuthMountPath,omitempty"`
	// runLauncherAsNode makes the launcher one of the training nodes.
	// +optional
	// +kubebuilder:default=false
	RunLauncherAsNode *bool `json:"runLauncherAsNode,omitempty"`
}

// JAXMLPolicySource marks a JAX runtime.
type JAXMLPolicySource struct{}

// XGBoostMLPolicySource marks an XGBoost runtime.
type XGBoostMLPolicySource struct{}

// FluxMLPolicySource configures Flux.
type FluxMLPolicySource struct {
	// numProcPerNode is the number of Flux tasks per node.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	NumProcPerNode *int32 `json:"numProcPerNode,omitempty"`
}
