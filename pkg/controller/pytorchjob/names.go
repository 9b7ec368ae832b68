package pytorchjob

import (
	"fmt"
	"strconv"
	"strings"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
)

// OperatorName is the value of training.kubeflow.org/operator-name on every pod
// and Service, as training-operator v1.9 set it; Kueue's pod selector for
// PyTorchJobs uses it.
const OperatorName = kubeflowv1.PyTorchJobOperatorName

// Labels of older operators, still set so that scripts and docs written for
// them keep selecting the pods (training-operator v1.3-v1.6 set the
// unprefixed ones next to the training.kubeflow.org ones; older docs used
// pytorch_job_name).
const (
	LegacyJobNameLabel       = "job-name"
	LegacyGroupNameLabel     = "group-name"
	LegacyReplicaTypeLabel   = "replica-type"
	LegacyReplicaIndexLabel  = "replica-index"
	LegacyJobRoleLabel       = "job-role"
	LegacyPyTorchJobName     = "pytorch_job_name"
	LegacyPyTorchJobNameDash = "pytorch-job-name"

	// GroupName is the value of group-name.
	GroupName = "kubeflow.org"
	// MasterRole is the value of the job-role labels.
	MasterRole = "master"
)

// CompletionIndexLabel is set by the Job controller on each pod of an Indexed
// Job. The elastic workers of JobSets rendered by earlier versions shared one
// Indexed Job, and their replica index came from it.
const CompletionIndexLabel = "batch.kubernetes.io/job-completion-index"

// Replicated job names in the JobSet.
const (
	// MasterJob runs the Master pod.
	MasterJob = "master"
	// ElasticWorkerJob ran every worker of an elastic job without a Master, as
	// one Indexed Job, in JobSets rendered by earlier versions; each worker now
	// has its own WorkerJob.
	ElasticWorkerJob = "worker"
)

// WorkerJob is the replicated job of worker i. Each worker has its own because
// RANK must be the static value i+1 and the host name <job>-worker-i, which a
// shared pod template cannot express.
func WorkerJob(i int) string { return "worker-" + strconv.Itoa(i) }

// ReplicaName is the name of a replica's Service, and the host name the
// environment refers to: <job>-<type>-<index>, as v1 named pods and Services.
func ReplicaName(job string, rtype kubeflowv1.ReplicaType, index int) string {
	return strings.ReplaceAll(fmt.Sprintf("%s-%s-%d", job, lowerType(rtype), index), "/", "-")
}

// Replicas returns the replica count of a (defaulted) role, 0 when it is absent.
func Replicas(job *kubeflowv1.PyTorchJob, rtype kubeflowv1.ReplicaType) int32 {
	if rs := job.Spec.PyTorchReplicaSpecs[rtype]; rs != nil && rs.Replicas != nil {
		return *rs.Replicas
	}
	return 0
}

// HasMaster reports whether the job has a Master role.
func HasMaster(job *kubeflowv1.PyTorchJob) bool {
	return job.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeMaster] != nil
}

// SelectorLabels are the labels that select every pod of the job.
func SelectorLabels(job string) map[string]string {
	return map[string]string{
		kubeflowv1.JobNameLabel:      job,
		kubeflowv1.OperatorNameLabel: OperatorName,
	}
}

// RoleSelector is status.replicaStatuses[<type>].selector: the job's pods of one
// role, in the label selector string format (the scale subresource reads it).
func RoleSelector(job string, rtype kubeflowv1.ReplicaType) string {
	// Keys in sorted order, as metav1.FormatLabelSelector writes them.
	return fmt.Sprintf("%s=%s,%s=%s,%s=%s",
		kubeflowv1.JobNameLabel, job,
		kubeflowv1.OperatorNameLabel, OperatorName,
		kubeflowv1.ReplicaTypeLabel, lowerType(rtype))
}

// PodLabels are the labels of one replica's pods (and of its Service). index -1
// leaves out the index labels. isMaster marks the pod that carries
// job-role=master.
func PodLabels(job string, rtype kubeflowv1.ReplicaType, index int, isMaster bool) map[string]string {
	lower := lowerType(rtype)
	l := SelectorLabels(job)
	l[kubeflowv1.ReplicaTypeLabel] = lower
	l[LegacyGroupNameLabel] = GroupName
	l[LegacyReplicaTypeLabel] = lower
	l[LegacyPyTorchJobName] = job
	l[LegacyPyTorchJobNameDash] = job
	if index >= 0 {
		l[kubeflowv1.ReplicaIndexLabel] = strconv.Itoa(index)
		l[LegacyReplicaIndexLabel] = strconv.Itoa(index)
	}
	if isMaster {
		l[kubeflowv1.JobRoleLabel] = MasterRole
		l[LegacyJobRoleLabel] = MasterRole
	}
	return l
}

// lowerType is the replica type as it appears in names and labels.
func lowerType(t kubeflowv1.ReplicaType) string { return strings.ToLower(string(t)) }

// ReplicaTypeOf maps the lower-case replica-type label value back to the role.
func ReplicaTypeOf(label string) (kubeflowv1.ReplicaType, bool) {
	for _, t := range []kubeflowv1.ReplicaType{kubeflowv1.PyTorchJobReplicaTypeMaster, kubeflowv1.PyTorchJobReplicaTypeWorker} {
		if strings.EqualFold(label, string(t)) {
			return t, true
		}
	}
	return "", false
}

// Roles lists the job's roles in a fixed order (Master first), for the
// deterministic iteration v1's map order never had.
func Roles(job *kubeflowv1.PyTorchJob) []kubeflowv1.ReplicaType {
	var out []kubeflowv1.ReplicaType
	for _, t := range []kubeflowv1.ReplicaType{kubeflowv1.PyTorchJobReplicaTypeMaster, kubeflowv1.PyTorchJobReplicaTypeWorker} {
		if job.Spec.PyTorchReplicaSpecs[t] != nil {
			out = append(out, t)
		}
	}
	return out
}
