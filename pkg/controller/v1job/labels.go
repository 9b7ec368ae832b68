package v1job

import (
	"fmt"
	"strconv"
	"strings"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
)

// Labels of older operators, set beside the training.kubeflow.org ones so
// that scripts written for them keep selecting the pods.
const (
	LegacyGroupNameLabel    = "group-name"
	LegacyReplicaTypeLabel  = "replica-type"
	LegacyReplicaIndexLabel = "replica-index"
	LegacyJobRoleLabel      = "job-role"
	// GroupName is the value of group-name.
	GroupName = "kubeflow.org"
	// MasterRole is the value of the job-role labels.
	MasterRole = "master"
)

// LowerType is the replica type as it appears in names and labels.
func LowerType(t kubeflowv1.ReplicaType) string { return strings.ToLower(string(t)) }

// ReplicaName is v1's name of a replica's pod and Service, and its host
// name: <job>-<type>-<index>.
func ReplicaName(job string, rtype kubeflowv1.ReplicaType, index int) string {
	return strings.ReplaceAll(fmt.Sprintf("%s-%s-%d", job, LowerType(rtype), index), "/", "-")
}

// ReplicatedJobName is the JobSet's replicated job of a replica:
// <type>-<index> ("launcher-0", "worker-1"). Each replica has its own, so
// that its pod has its static index and v1's host name.
func ReplicatedJobName(rtype kubeflowv1.ReplicaType, index int) string {
	return LowerType(rtype) + "-" + strconv.Itoa(index)
}

// SelectorLabels are the labels that select every pod of a job.
func (d *Def) SelectorLabels(job string) map[string]string {
	return map[string]string{kubeflowv1.JobNameLabel: job, kubeflowv1.OperatorNameLabel: d.OperatorName}
}

// RoleSelector is status.replicaStatuses[<type>].selector: the job's pods of
// one role, as a label selector string (keys sorted, as
// metav1.FormatLabelSelector writes them).
func (d *Def) RoleSelector(job string, rtype kubeflowv1.ReplicaType) string {
	return fmt.Sprintf("%s=%s,%s=%s,%s=%s",
		kubeflowv1.JobNameLabel, job,
		kubeflowv1.OperatorNameLabel, d.OperatorName,
		kubeflowv1.ReplicaTypeLabel, LowerType(rtype))
}

// PodLabels are the labels of one replica's pod (and Service).
func (d *Def) PodLabels(job string, rtype kubeflowv1.ReplicaType, index int) map[string]string {
	lower := LowerType(rtype)
	l := d.SelectorLabels(job)
	l[kubeflowv1.ReplicaTypeLabel] = lower
	l[kubeflowv1.ReplicaIndexLabel] = strconv.Itoa(index)
	l[LegacyGroupNameLabel] = GroupName
	l[LegacyReplicaTypeLabel] = lower
	l[LegacyReplicaIndexLabel] = strconv.Itoa(index)
	if d.MasterRole != "" && rtype == d.MasterRole {
		l[kubeflowv1.JobRoleLabel] = MasterRole
		l[LegacyJobRoleLabel] = MasterRole
	}
	return l
}
