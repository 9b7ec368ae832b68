package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TrainJob runs one distributed training job: a runtime template (referenced by
// spec.runtimeRef) completed with the job's own image, command, node count and
// resources. Its name becomes part of pod host names; the admission webhook
// checks it (with the field path metadata.name, which a CRD rule cannot report).
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=trainer,shortName=tj
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.phase`,description="Current state: Pending, Running, Suspended, Complete or Failed"
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.status.numNodes`,description="Training nodes asked for"
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyNodes`,description="Training nodes running and ready"
// +kubebuilder:printcolumn:name="Progress",type=integer,JSONPath=`.status.trainerStatus.progressPercentage`,description="Percent done, as the training code reported it"
// +kubebuilder:printcolumn:name="Runtime",type=string,JSONPath=`.spec.runtimeRef.name`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.reason`,description="Why the TrainJob is in its state"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Restarts",type=integer,JSONPath=`.status.restarts`,description="Times the JobSet's failure policy restarted the pods",priority=1
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`,priority=1
type TrainJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what the user asks for.
	// +optional
	Spec TrainJobSpec `json:"spec,omitzero"`

	// status is what Trainyard observed.
	// +optional
	Status TrainJobStatus `json:"status,omitzero"`
}

// TrainJobList is a list of TrainJobs.
//
// +kubebuilder:object:root=true
type TrainJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TrainJob `json:"items"`
}

// TrainJobSpec is the desired state of a TrainJob.
type TrainJobSpec struct {
	// runtimeRef names the TrainingRuntime or ClusterTrainingRuntime to start from.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf", message="field is immutable"
	RuntimeRef RuntimeRef `json:"runtimeRef,omitzero"`

	// initializer configures the dataset and model initializer jobs of the runtime.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf", message="field is immutable"
	Initializer *Initializer `json:"initializer,omitempty"`

	// trainer configures the runtime's trainer job (its "node" container).
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf", message="field is immutable"
	Trainer *Trainer `json:"trainer,omitempty"`

	// labels are added to the JobSet (Kubeflow Trainer v2.1 shape; Trainyard turns
	// them into a runtime patch).
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// annotations are added to the JobSet (Kubeflow Trainer v2.1 shape; Trainyard
	// turns them into a runtime patch).
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`

	// podTemplateOverrides change pod templates of the runtime's replicated jobs
	// (Kubeflow Trainer v2.1 shape; Trainyard turns each into a runtime patch).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	PodTemplateOverrides []PodTemplateOverride `json:"podTemplateOverrides,omitempty"`

	// runtimePatches change the runtime template for this job, one entry per
	// manager (the user, the SDK, Kueue...) (Kubeflow Trainer v2.3 shape).
	// +optional
	// +listType=map
	// +listMapKey=manager
	// +kubebuilder:validation:MaxItems=16
	RuntimePatches []RuntimePatch `json:"runtimePatches,omitempty"`

	// suspend stops the job's pods while true; the job resumes when it turns false.
	// Queueing systems such as Kueue create TrainJobs suspended and unsuspend them on admission.
	// +optional
	// +kubebuilder:default=false
	Suspend *bool `json:"suspend,omitempty"`

	// activeDeadlineSeconds bounds how long the job may run, counted from its
	// creation or its last resume; past it the job fails with reason DeadlineExceeded.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf", message="field is immutable"
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`

	// managedBy names the controller that reconciles this TrainJob. Trainyard
	// reconciles "trainer.kubeflow.org/trainjob-controller" (the default) and leaves
	// "kueue.x-k8s.io/multikueue" to MultiKueue.
	// +optional
	// +kubebuilder:default="trainer.kubeflow.org/trainjob-controller"
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self in ['trainer.kubeflow.org/trainjob-controller', 'kueue.x-k8s.io/multikueue']", message="managedBy must be trainer.kubeflow.org/trainjob-controller or kueue.x-k8s.io/multikueue"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf", message="field is immutable"
	ManagedBy *string `json:"managedBy,omitempty"`

	// ttlSecondsAfterFinished deletes the TrainJob, and with it its JobSet and
	// pods, this many seconds after it completed or failed (Trainyard, additive).
	// Unset keeps finished TrainJobs.
	// +optional
	// +kubebuilder:validation:Minimum=0
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
}

// RuntimeRef references a TrainingRuntime (same namespace) or a ClusterTrainingRuntime.
type RuntimeRef struct {
	// name of the runtime.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`

	// apiGroup of the runtime; defaults to trainer.kubeflow.org.
	// +optional
	// +kubebuilder:default="trainer.kubeflow.org"
	// +kubebuilder:validation:MaxLength=253
	APIGroup *string `json:"apiGroup,omitempty"`

	// kind of the runtime: ClusterTrainingRuntime (default) or TrainingRuntime.
	// +optional
	// +kubebuilder:default="ClusterTrainingRuntime"
	// +kubebuilder:validation:MaxLength=253
	Kind *string `json:"kind,omitempty"`
}

// Initializer configures the runtime's initializer jobs.
type Initializer struct {
	// dataset configures the dataset-initializer job.
	// +optional
	Dataset *DatasetInitializer `json:"dataset,omitempty"`
	// model configures the model-initializer job.
	// +optional
	Model *ModelInitializer `json:"model,omitempty"`
}

// DatasetInitializer says where a dataset comes from.
type DatasetInitializer struct {
	// storageUri is the dataset's location, e.g. hf://org/name or s3://bucket/path.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self == '' || self.matches('^[A-Za-z][A-Za-z0-9+.-]*://.+$')", message="storageUri must be empty or a URI of the form scheme://..."
	StorageUri *string `json:"storageUri,omitempty"` //nolint:revive // Kubeflow Trainer's Go field name
	// env is added to the dataset-initializer container.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=128
	Env []corev1.EnvVar `json:"env,omitempty"`
	// secretRef names a Secret whose keys become environment variables of the initializer.
	// +optional
	SecretRef *corev1.LocalObjectReference `json:"secretRef,omitempty"`
}

// ModelInitializer says where a model comes from.
type ModelInitializer struct {
	// storageUri is the model's location, e.g. hf://org/name or s3://bucket/path.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self == '' || self.matches('^[A-Za-z][A-Za-z0-9+.-]*://.+$')", message="storageUri must be empty or a URI of the form scheme://..."
	StorageUri *string `json:"storageUri,omitempty"` //nolint:revive // Kubeflow Trainer's Go field name
	// env is added to the model-initializer container.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=128
	Env []corev1.EnvVar `json:"env,omitempty"`
	// secretRef names a Secret whose keys become environment variables of the initializer.
	// +optional
	SecretRef *corev1.LocalObjectReference `json:"secretRef,omitempty"`
}

// Trainer configures the runtime's trainer job.
type Trainer struct {
	// image replaces the image of the "node" container.
	// +optional
	// +kubebuilder:validation:MaxLength=500
	Image *string `json:"image,omitempty"`

	// command replaces the command of the "node" container.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=128
	Command []string `json:"command,omitempty"`

	// args replaces the args of the "node" container.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=128
	Args []string `json:"args,omitempty"`

	// env is merged into the "node" container's environment (same name: this wins).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=128
	Env []corev1.EnvVar `json:"env,omitempty"`

	// numNodes is the number of training nodes (pods), over the runtime's mlPolicy.numNodes; 0 runs no training pod.
	// With 0 the trainer's Job (and an MPI runtime's node Job) gets no pods and completes at once,
	// while the runtime's other jobs (initializers) run as usual.
	// +optional
	// +kubebuilder:validation:Minimum=0
	NumNodes *int32 `json:"numNodes,omitempty"`

	// resourcesPerNode is merged into the "node" container's resources.
	// +optional
	ResourcesPerNode *corev1.ResourceRequirements `json:"resourcesPerNode,omitempty"`

	// numProcPerNode is the number of processes per node: a positive integer, or
	// "auto" (one per GPU, else one per CPU of the node's resources), "cpu" or "gpu".
	// An integer is the Kubeflow Trainer v2.3 form; the strings are the v2.1 form.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : self in ['auto', 'cpu', 'gpu']", message="numProcPerNode must be an integer >= 1 or one of auto, cpu, gpu"
	NumProcPerNode *intstr.IntOrString `json:"numProcPerNode,omitempty"`
}

// PodTemplateOverride is the Kubeflow Trainer v2.1 way to change pod templates of
// some replicated jobs. Trainyard turns each one into a RuntimePatch.
type PodTemplateOverride struct {
	// targetJobs are the replicated jobs to change.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	TargetJobs []PodTemplateOverrideTargetJob `json:"targetJobs,omitempty"`
	// metadata labels and annotations are added to the pods.
	// +optional
	Metadata *metav1.ObjectMeta `json:"metadata,omitempty"`
	// spec changes the pod spec.
	// +optional
	Spec *PodTemplateSpecOverride `json:"spec,omitempty"`
}

// PodTemplateOverrideTargetJob names a replicated job.
type PodTemplateOverrideTargetJob struct {
	// name of the replicated job.
	// +required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name,omitempty"`
}

// PodTemplateSpecOverride is the v2.1 pod spec override.
type PodTemplateSpecOverride struct {
	// serviceAccountName replaces the pods' service account.
	// +optional
	ServiceAccountName *string `json:"serviceAccountName,omitempty"`
	// nodeSelector is merged into the pods' node selector, key by key.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// tolerations are added to the pods' tolerations.
	// +optional
	// +listType=atomic
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// volumes replace the runtime's volumes of the same name; others are added.
	// +optional
	// +listType=map
	// +listMapKey=name
	Volumes []corev1.Volume `json:"volumes,omitempty"`
	// initContainers override init containers of the runtime, by name.
	// +optional
	// +listType=map
	// +listMapKey=name
	InitContainers []ContainerOverride `json:"initContainers,omitempty"`
	// containers override containers of the runtime, by name.
	// +optional
	// +listType=map
	// +listMapKey=name
	Containers []ContainerOverride `json:"containers,omitempty"`
	// schedulingGates replace gates of the same name; others are added.
	// +optional
	// +listType=map
	// +listMapKey=name
	SchedulingGates []corev1.PodSchedulingGate `json:"schedulingGates,omitempty"`
	// imagePullSecrets replace secrets of the same name; others are added.
	// +optional
	// +listType=map
	// +listMapKey=name
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
}

// ContainerOverride is the v2.1 per-container override.
type ContainerOverride struct {
	// name of an existing container in the runtime's pod template.
	// +required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name,omitempty"`
	// env replaces variables of the same name; others are added.
	// +optional
	// +listType=map
	// +listMapKey=name
	Env []corev1.EnvVar `json:"env,omitempty"`
	// volumeMounts replace mounts at the same path; others are added.
	// +optional
	// +listType=map
	// +listMapKey=name
	VolumeMounts []corev1.VolumeMount `json:"volumeMounts,omitempty"`
}
