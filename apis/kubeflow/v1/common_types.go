package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Labels the training operator put on the pods and Services of a job
// (training-operator v1.7 and later). Scripts and dashboards select pods with
// them, so Trainyard sets them too.
const (
	JobNameLabel      = "training.kubeflow.org/job-name"
	OperatorNameLabel = "training.kubeflow.org/operator-name"
	ReplicaTypeLabel  = "training.kubeflow.org/replica-type"
	ReplicaIndexLabel = "training.kubeflow.org/replica-index"
	JobRoleLabel      = "training.kubeflow.org/job-role"
)

// Values of runPolicy.managedBy. A job managed by anything but
// KubeflowJobsController (MultiKueue dispatches it elsewhere) is left alone.
const (
	KubeflowJobsController = "kubeflow.org/training-operator"
	MultiKueueController   = "kueue.x-k8s.io/multikueue"
)

// ReplicaType names a role in a job ("Master", "Worker").
type ReplicaType string

// ReplicaSpec describes the pods of one role.
type ReplicaSpec struct {
	// replicas is the number of pods of this role. Defaults to 1.
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// template is the pod template of this role.
	// +optional
	Template corev1.PodTemplateSpec `json:"template,omitempty"`

	// restartPolicy replaces the pod template's restart policy: Always,
	// OnFailure (the default), Never, or ExitCode (exit codes 1-127 fail the
	// job, 128-255 restart the pod).
	// +optional
	RestartPolicy RestartPolicy `json:"restartPolicy,omitempty"`
}

// RestartPolicy says what happens when a pod of a role fails.
// +kubebuilder:validation:Enum=Always;OnFailure;Never;ExitCode
type RestartPolicy string

// Restart policies.
const (
	RestartPolicyAlways    RestartPolicy = "Always"
	RestartPolicyOnFailure RestartPolicy = "OnFailure"
	RestartPolicyNever     RestartPolicy = "Never"
	RestartPolicyExitCode  RestartPolicy = "ExitCode"
)

// CleanPodPolicy says which pods are deleted once a job has finished.
// +kubebuilder:validation:Enum=All;Running;None
type CleanPodPolicy string

// Clean pod policies.
const (
	CleanPodPolicyAll     CleanPodPolicy = "All"
	CleanPodPolicyRunning CleanPodPolicy = "Running"
	CleanPodPolicyNone    CleanPodPolicy = "None"
)

// RunPolicy holds the policies every v1 job kind shares.
type RunPolicy struct {
	// cleanPodPolicy says which pods are deleted when the job finishes. Defaults to None.
	// +optional
	CleanPodPolicy *CleanPodPolicy `json:"cleanPodPolicy,omitempty"`

	// ttlSecondsAfterFinished deletes the job this many seconds after it finished.
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// activeDeadlineSeconds bounds how long the job may be active, counted from
	// status.startTime; past it the job fails.
	// +optional
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`

	// backoffLimit is the number of retries before the job is marked failed.
	// +optional
	BackoffLimit *int32 `json:"backoffLimit,omitempty"`

	// schedulingPolicy configures gang scheduling (Volcano, scheduler-plugins).
	// Trainyard accepts it but does not act on it; queue with Kueue instead.
	// +optional
	SchedulingPolicy *SchedulingPolicy `json:"schedulingPolicy,omitempty"`

	// suspend stops the job's pods while true. Kueue creates queued jobs
	// suspended and unsuspends them on admission.
	// +kubebuilder:default:=false
	// +optional
	Suspend *bool `json:"suspend,omitempty"`

	// managedBy names the controller of the job: empty or
	// "kubeflow.org/training-operator" (Trainyard), or "kueue.x-k8s.io/multikueue".
	// Immutable.
	// +optional
	ManagedBy *string `json:"managedBy,omitempty"`
}

// SchedulingPolicy holds gang-scheduling settings.
type SchedulingPolicy struct {
	// minAvailable is the number of pods that must be scheduled together (gang scheduling).
	// +optional
	MinAvailable *int32 `json:"minAvailable,omitempty"`
	// queue is the gang scheduler's queue.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf", message="spec.runPolicy.schedulingPolicy.queue is immutable"
	Queue string `json:"queue,omitempty"`
	// minResources are the resources the gang needs to start.
	// +optional
	MinResources *map[corev1.ResourceName]resource.Quantity `json:"minResources,omitempty"`
	// priorityClass is the gang's priority class.
	// +optional
	PriorityClass string `json:"priorityClass,omitempty"`
	// scheduleTimeoutSeconds bounds how long the gang may wait to be scheduled.
	// +optional
	ScheduleTimeoutSeconds *int32 `json:"scheduleTimeoutSeconds,omitempty"`
}

// JobStatus is the observed state of a v1 job.
type JobStatus struct {
	// conditions are the job's conditions; the last one is its current state.
	// +optional
	Conditions []JobCondition `json:"conditions,omitempty"`

	// replicaStatuses counts the pods of each role.
	// +optional
	ReplicaStatuses map[ReplicaType]*ReplicaStatus `json:"replicaStatuses,omitempty"`

	// startTime is when the job was first (or last resumed and) reconciled.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// completionTime is when the job succeeded or failed.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// lastReconcileTime is when the job was last reconciled.
	// +optional
	LastReconcileTime *metav1.Time `json:"lastReconcileTime,omitempty"`
}

// ReplicaStatus counts the pods of one role.
type ReplicaStatus struct {
	// active pods are running.
	// +optional
	Active int32 `json:"active,omitempty"`
	// succeeded pods exited 0.
	// +optional
	Succeeded int32 `json:"succeeded,omitempty"`
	// failed pods failed (or are being deleted while running).
	// +optional
	Failed int32 `json:"failed,omitempty"`
	// Deprecated: use selector.
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
	// selector selects the pods of this role, as a label selector string (for
	// the scale subresource and the HPA).
	// +optional
	Selector string `json:"selector,omitempty"`
}

// JobCondition is one condition of a v1 job.
type JobCondition struct {
	// type is Created, Running, Restarting, Succeeded, Suspended or Failed.
	Type JobConditionType `json:"type"`
	// status is True, False or Unknown.
	Status corev1.ConditionStatus `json:"status"`
	// reason is <Kind><Reason>, e.g. PyTorchJobRunning.
	// +optional
	Reason string `json:"reason,omitempty"`
	// message is a human-readable explanation of the condition.
	// +optional
	Message string `json:"message,omitempty"`
	// lastUpdateTime is when the condition was last updated.
	// +optional
	LastUpdateTime metav1.Time `json:"lastUpdateTime,omitempty"`
	// lastTransitionTime is when the condition last changed status.
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
}

// JobConditionType is the type of a JobCondition.
type JobConditionType string

// Condition types.
const (
	JobCreated    JobConditionType = "Created"
	JobRunning    JobConditionType = "Running"
	JobRestarting JobConditionType = "Restarting"
	JobSucceeded  JobConditionType = "Succeeded"
	JobSuspended  JobConditionType = "Suspended"
	JobFailed     JobConditionType = "Failed"
)
