package v1alpha1

// A TrainJob's runtime patches (spec.runtimePatches).
//
// The file name sorts after trainjob_types.go on purpose: controller-gen names the
// imports of zz_generated.deepcopy.go in the order it meets the types (files by
// name), and core/v1 must be met before meta/v1 for the output to stay as it is.

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RuntimePatch is one manager's change to the runtime template, for this job only
// (Kubeflow Trainer v2.3 shape).
type RuntimePatch struct {
	// manager identifies who owns this patch, e.g. kueue.x-k8s.io/manager.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf", message="field is immutable"
	Manager string `json:"manager,omitempty"`
	// time the patch was last changed (informational).
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
	// trainingRuntimeSpec is the patch.
	// +optional
	TrainingRuntimeSpec *TrainingRuntimeSpecPatch `json:"trainingRuntimeSpec,omitempty"`
}

// TrainingRuntimeSpecPatch patches a TrainingRuntimeSpec.
type TrainingRuntimeSpecPatch struct {
	// +optional
	Template *JobSetTemplatePatch `json:"template,omitempty"`
}

// JobSetTemplatePatch patches the JobSet template.
type JobSetTemplatePatch struct {
	// metadata labels and annotations are added to the JobSet.
	// +optional
	Metadata *metav1.ObjectMeta `json:"metadata,omitempty"`
	// +optional
	Spec *JobSetSpecPatch `json:"spec,omitempty"`
}

// JobSetSpecPatch patches replicated jobs by name.
type JobSetSpecPatch struct {
	// replicatedJobs patch the runtime's replicated jobs, by name.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	ReplicatedJobs []ReplicatedJobPatch `json:"replicatedJobs,omitempty"`
}

// ReplicatedJobPatch patches one replicated job.
type ReplicatedJobPatch struct {
	// name of an existing replicated job of the runtime.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// +optional
	Template *JobTemplatePatch `json:"template,omitempty"`
}

// JobTemplatePatch patches a Job template.
type JobTemplatePatch struct {
	// metadata labels and annotations are added to the Job.
	// +optional
	Metadata *metav1.ObjectMeta `json:"metadata,omitempty"`
	// +optional
	Spec *JobSpecPatch `json:"spec,omitempty"`
}

// JobSpecPatch patches a Job spec.
type JobSpecPatch struct {
	// +optional
	Template *PodTemplatePatch `json:"template,omitempty"`
}

// PodTemplatePatch patches a pod template.
type PodTemplatePatch struct {
	// metadata labels and annotations are added to the pods.
	// +optional
	Metadata *metav1.ObjectMeta `json:"metadata,omitempty"`
	// +optional
	Spec *PodSpecPatch `json:"spec,omitempty"`
}

// PodSpecPatch patches a pod spec. Scheduling fields (nodeSelector, affinity,
// tolerations, schedulingGates) stay mutable so that queueing systems can set them
// on admission; the others are fixed once set.
type PodSpecPatch struct {
	// serviceAccountName replaces the pods' service account.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf", message="field is immutable"
	ServiceAccountName *string `json:"serviceAccountName,omitempty"`
	// volumes replace the runtime's volumes of the same name; others are added.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=128
	// +kubebuilder:validation:XValidation:rule="self == oldSelf", message="field is immutable"
	Volumes []corev1.Volume `json:"volumes,omitempty"`
	// initContainers override init containers of the runtime, by name.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self == oldSelf", message="field is immutable"
	InitContainers []ContainerPatch `json:"initContainers,omitempty"`
	// containers override containers of the runtime, by name.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self == oldSelf", message="field is immutable"
	Containers []ContainerPatch `json:"containers,omitempty"`
	// imagePullSecrets replace secrets of the same name; others are added.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self == oldSelf", message="field is immutable"
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf", message="field is immutable"
	SecurityContext *corev1.PodSecurityContext `json:"securityContext,omitempty"`
	// nodeSelector is merged into the pods' node selector, key by key.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// tolerations are added to the pods' tolerations.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=128
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// schedulingGates replace gates of the same name; others are added.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	SchedulingGates []corev1.PodSchedulingGate `json:"schedulingGates,omitempty"`
	// terminationGracePeriodSeconds replaces the pods' grace period.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:XValidation:rule="self == oldSelf", message="field is immutable"
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`
}

// ContainerPatch patches one existing container.
type ContainerPatch struct {
	// name of an existing container.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// env replaces variables of the same name; others are added.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=128
	Env []corev1.EnvVar `json:"env,omitempty"`
	// volumeMounts replace mounts at the same path; others are added.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=128
	VolumeMounts []corev1.VolumeMount `json:"volumeMounts,omitempty"`
	// +optional
	SecurityContext *corev1.SecurityContext `json:"securityContext,omitempty"`
}
