package mpi

import (
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
)

// The OpenMPI settings the launcher gets, in this order: Open MPI 4's (ORTE)
// then, as Kubeflow Trainer v2.4 adds them, Open MPI 5's (PRRTE, whose
// variables are spelled PRTE_MCA_). Open MPI 5 ignores the ORTE ones, so
// without them a multi-node job silently runs on the launcher alone.
// PRRTE must not keep fully qualified host names: the hostfile names pods by
// JobSet's short <pod>.<subdomain> form, which never matches the name PRRTE
// resolves for its own host, and the launcher would ssh to itself.
const (
	EnvHostfile     = "OMPI_MCA_orte_default_hostfile"
	EnvKeepFQDN     = "OMPI_MCA_orte_keep_fqdn_hostnames"
	EnvDefaultSlots = "OMPI_MCA_orte_set_default_slots"
	EnvRshArgs      = "OMPI_MCA_plm_rsh_args"
	EnvPRTEHostfile = "PRTE_MCA_prte_default_hostfile"
	EnvPRTEKeepFQDN = "PRTE_MCA_prte_keep_fqdn_hostnames"
	EnvPRTESlots    = "PRTE_MCA_prte_set_default_slots"
	EnvPRTESSHArgs  = "PRTE_MCA_plm_ssh_args"
	rshArgs         = "-o ConnectionAttempts=10"
)

var reserved = []string{EnvHostfile, EnvKeepFQDN, EnvDefaultSlots, EnvRshArgs,
	EnvPRTEHostfile, EnvPRTEKeepFQDN, EnvPRTESlots, EnvPRTESSHArgs}

// launcherEnv are the launcher's OpenMPI settings, in order, for this many
// slots per node.
func launcherEnv(slots int32) []corev1.EnvVar {
	hostfile, n := HostfileDir+"/"+HostfileKey, strconv.Itoa(int(slots))
	return []corev1.EnvVar{
		{Name: EnvHostfile, Value: hostfile},
		{Name: EnvKeepFQDN, Value: "true"},
		{Name: EnvDefaultSlots, Value: n},
		{Name: EnvRshArgs, Value: rshArgs},
		{Name: EnvPRTEHostfile, Value: hostfile},
		{Name: EnvPRTEKeepFQDN, Value: "false"},
		{Name: EnvPRTESlots, Value: n},
		{Name: EnvPRTESSHArgs, Value: rshArgs},
	}
}

// envBeforeTrainer upserts vars into a launcher env that already holds the
// TrainJob's env, keeping the TrainJob's own variables (those the runtime did
// not declare) after them: runtime env, then OpenMPI's, then the TrainJob's.
func envBeforeTrainer(info *runtime.Info, env []corev1.EnvVar, t *trainer.Trainer, vars ...corev1.EnvVar) []corev1.EnvVar {
	if t == nil || len(t.Env) == 0 {
		return runtime.UpsertEnv(env, vars...)
	}
	var declared []string
	for _, rj := range info.Runtime.Spec.Template.Spec.ReplicatedJobs {
		if rj.Name != info.TrainerJob {
			continue
		}
		for _, c := range rj.Template.Spec.Template.Spec.Containers {
			if c.Name == trainer.NodeContainer {
				for _, e := range c.Env {
					declared = append(declared, e.Name)
				}
			}
		}
	}
	var base, added []corev1.EnvVar
	for _, e := range env {
		fromJob := slices.ContainsFunc(t.Env, func(j corev1.EnvVar) bool { return j.Name == e.Name })
		if fromJob && !slices.Contains(declared, e.Name) {
			added = append(added, e)
		} else {
			base = append(base, e)
		}
	}
	return append(runtime.UpsertEnv(base, vars...), added...)
}
