package mpijob

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/controller/v1job"
)

// Paths, volumes and files of an MPIJob's pods. /etc/mpi and its files are
// v1's; the SSH ones are Trainyard's transport.
const (
	ConfigDir      = "/etc/mpi"
	HostfileKey    = "hostfile"
	KubexecKey     = "kubexec.sh"
	DiscoverKey    = "discover_hosts.sh"
	SSHDKey        = "sshd.sh"
	SSHDir         = "/etc/mpi-ssh"
	SSHDRunDir     = "/var/run/mpi-sshd"
	SSHDPrivSepDir = "/run/sshd"
	SSHPort        = 2222

	configVolume  = "mpi-job-config"
	sshVolume     = "mpi-job-ssh"
	sshdVolume    = "mpi-job-sshd"
	privSepVolume = "mpi-job-sshd-privsep"

	// SlotsAnnotation is on each worker's Job template: the worker's slots
	// in the hostfile (spec.slotsPerWorker), which the Transport plugin reads.
	SlotsAnnotation = "trainyard.io/mpi-slots"
	// LauncherSlotsAnnotation is on the launcher's Job template when the
	// launcher has GPUs: v1 listed it in the hostfile too.
	LauncherSlotsAnnotation = "trainyard.io/mpi-launcher-slots"
)

// LauncherHost is the launcher's host name, as v1 named its pod: <job>-launcher.
func LauncherHost(job string) string { return job + "-launcher" }

// pod completes a replica's pod: the launcher's environment and files, or a
// worker's SSH server.
func pod(j v1job.Job, p v1job.PodInfo, tpl *v1job.PodTemplate) error {
	job := j.(*kubeflowv1.MPIJob)
	slots := strconv.Itoa(int(ptr.Deref(job.Spec.SlotsPerWorker, 1)))
	if p.Type == kubeflowv1.MPIJobReplicaTypeLauncher {
		if tpl.Spec.Hostname == v1job.ReplicaName(job.Name, p.Type, p.Index) {
			tpl.Spec.Hostname = LauncherHost(job.Name)
		}
		launcher(job, &tpl.Spec)
		if hasGPU(&tpl.Spec) {
			tpl.Annotations = withAnnotation(tpl.Annotations, LauncherSlotsAnnotation, slots)
		}
		return nil
	}
	tpl.Annotations = withAnnotation(tpl.Annotations, SlotsAnnotation, slots)
	worker(job, &tpl.Spec)
	return nil
}

func withAnnotation(a map[string]string, k, v string) map[string]string {
	if a == nil {
		a = map[string]string{}
	}
	a[k] = v
	return a
}

// LauncherEnv is v1's environment of the launcher's containers, then
// Trainyard's one addition: every daemon is started from the launcher (the
// workers hold no private key to start others).
func LauncherEnv(gpu bool) []corev1.EnvVar {
	env := []corev1.EnvVar{
		{Name: "OMPI_MCA_plm_rsh_agent", Value: ConfigDir + "/" + KubexecKey},
		{Name: "OMPI_MCA_orte_default_hostfile", Value: ConfigDir + "/" + HostfileKey},
		{Name: "I_MPI_HYDRA_BOOTSTRAP", Value: "rsh"},
		{Name: "I_MPI_HYDRA_BOOTSTRAP_EXEC", Value: ConfigDir + "/" + KubexecKey},
	}
	if !gpu {
		// v1: a launcher without GPUs sees none (CUDA images would expose all).
		env = append(env, corev1.EnvVar{Name: "NVIDIA_VISIBLE_DEVICES", Value: ""})
	}
	return append(env, corev1.EnvVar{Name: "OMPI_MCA_plm_rsh_no_tree_spawn", Value: "1"})
}

// launcher gives every launcher container v1's environment and /etc/mpi, and
// the job's private key.
func launcher(job *kubeflowv1.MPIJob, ps *corev1.PodSpec) {
	gpu := hasGPU(ps)
	ps.Volumes = append(ps.Volumes, configVolumeOf(job.Name), corev1.Volume{Name: sshVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName:  SecretName(job.Name),
		DefaultMode: ptr.To[int32](0o400),
		Items:       []corev1.KeyToPath{{Key: corev1.SSHAuthPrivateKey, Path: "id_rsa", Mode: ptr.To[int32](0o600)}},
	}}})
	for i := range ps.Containers {
		c := &ps.Containers[i]
		c.Env = append(c.Env, LauncherEnv(gpu)...)
		c.VolumeMounts = append(c.VolumeMounts,
			corev1.VolumeMount{Name: configVolume, MountPath: ConfigDir},
			corev1.VolumeMount{Name: sshVolume, MountPath: SSHDir, ReadOnly: true})
	}
}

// worker runs the SSH server the ranks are started through in a worker's
// main container when it has no command of its own (v1 ran `sleep 365d`
// there, and exec'd the ranks into it), with the job's public key.
func worker(job *kubeflowv1.MPIJob, ps *corev1.PodSpec) {
	ps.Volumes = append(ps.Volumes, configVolumeOf(job.Name),
		corev1.Volume{Name: sshVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  SecretName(job.Name),
			DefaultMode: ptr.To[int32](0o444),
			Items:       []corev1.KeyToPath{{Key: SSHPublicKeyKey, Path: "authorized_keys"}},
		}}},
		corev1.Volume{Name: sshdVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		corev1.Volume{Name: privSepVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	c := &ps.Containers[v1job.ContainerIndex(ps, job.Spec.MainContainer)]
	c.VolumeMounts = append(c.VolumeMounts,
		corev1.VolumeMount{Name: configVolume, MountPath: ConfigDir},
		corev1.VolumeMount{Name: sshVolume, MountPath: SSHDir, ReadOnly: true},
		corev1.VolumeMount{Name: sshdVolume, MountPath: SSHDRunDir},
		corev1.VolumeMount{Name: privSepVolume, MountPath: SSHDPrivSepDir})
	if len(c.Command) == 0 && len(c.Args) == 0 {
		c.Command = []string{"/bin/sh", ConfigDir + "/" + SSHDKey}
	}
}

func configVolumeOf(job string) corev1.Volume {
	return corev1.Volume{Name: configVolume, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: ConfigName(job)},
		Items: []corev1.KeyToPath{
			{Key: HostfileKey, Path: HostfileKey, Mode: ptr.To[int32](0o444)},
			{Key: KubexecKey, Path: KubexecKey, Mode: ptr.To[int32](0o555)},
			{Key: DiscoverKey, Path: DiscoverKey, Mode: ptr.To[int32](0o555)},
			{Key: SSHDKey, Path: SSHDKey, Mode: ptr.To[int32](0o555)},
		},
	}}}
}

// hasGPU reports whether a container asks for a GPU: a resource limit whose
// name ends in .com/gpu or contains "gpu", as v1 decided it.
func hasGPU(ps *corev1.PodSpec) bool {
	for _, c := range ps.Containers {
		for name := range c.Resources.Limits {
			if strings.HasSuffix(string(name), ".com/gpu") || strings.Contains(string(name), "gpu") {
				return true
			}
		}
	}
	return false
}
