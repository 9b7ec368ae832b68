// Package mpi runs MPI runtimes (OpenMPI; DeepSpeed and MLX runtimes are MPI
// runtimes): a launcher job runs mpirun, which starts the ranks over SSH on the
// pods of the node job. The plugin sizes the node job, gives both jobs the SSH
// key pair of the TrainJob (a Secret it creates once) and the TrainJob's image,
// and the launcher a hostfile (a ConfigMap) and the OpenMPI settings (Open MPI
// 4's and 5's) that make mpirun use them.
package mpi

// The hostfile is applied (create, patch); the garbage collector deletes it with the TrainJob.
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;patch
// The key Secret is created once and never changed; get, list and watch for the cache (which
// keeps only Trainyard's own, by label), the garbage collector deletes it with the TrainJob.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/plan"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
)

// Name of the plugin.
const Name = "MPI"

// The replicated jobs an MPI runtime has, by name: the launcher runs mpirun,
// the node job runs the SSH servers the ranks are started through.
const (
	NodeJob     = "node"
	LauncherJob = "launcher"
)

// Volumes, keys and paths the plugin adds.
const (
	SSHAuthVolume  = "mpi-ssh-auth"
	HostfileVolume = "mpi-hostfile"
	HostfileKey    = "hostfile"
	HostfileDir    = "/etc/mpi"

	// The file names in the SSH volume. The private key is an ECDSA key;
	// "id_rsa" is a name every ssh client tries by default.
	PrivateKeyFile     = "id_rsa"
	PublicKeyFile      = "id_rsa.pub"
	AuthorizedKeysFile = "authorized_keys"

	// DefaultSSHAuthMountPath is the CRD default of sshAuthMountPath.
	DefaultSSHAuthMountPath = "/root/.ssh"
)

// Names and modes of the plugin's objects.
const (
	secretNameSuffix  = "-mpi-ssh-auth"
	hostfileCMSuffix  = "-mpi-hostfile"
	secretDefaultMode = int32(0o400)
	privateKeyMode    = int32(0o640)
	publicKeyMode     = int32(0o644)
	hostfileMode      = int32(0o444)
)

// MPI is the plugin.
type MPI struct{}

var (
	_ framework.ValidatePlugin = (*MPI)(nil)
	_ framework.MLPolicyPlugin = (*MPI)(nil)
	_ framework.PolicyClaimer  = (*MPI)(nil)
	_ framework.BuildPlugin    = (*MPI)(nil)
	_ framework.OwnerPlugin    = (*MPI)(nil)
)

// New returns the plugin.
func New() *MPI { return &MPI{} }

// Name implements framework.Plugin.
func (*MPI) Name() string { return Name }

// ClaimsMLPolicies implements framework.PolicyClaimer.
func (*MPI) ClaimsMLPolicies() []string { return []string{"mpi"} }

// Owns implements framework.OwnerPlugin.
func (*MPI) Owns() []client.Object { return []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}} }

func policy(info *runtime.Info) *trainer.MPIMLPolicySource {
	if mp := info.MLPolicy(); mp != nil {
		return mp.MPI
	}
	return nil
}

func runLauncherAsNode(pol *trainer.MPIMLPolicySource) bool {
	return ptr.Deref(pol.RunLauncherAsNode, false)
}

func sshAuthMountPath(pol *trainer.MPIMLPolicySource) string {
	return ptr.Deref(pol.SSHAuthMountPath, DefaultSSHAuthMountPath)
}

// SecretName is the name of the TrainJob's SSH key Secret.
func SecretName(req *runtime.Request) string { return req.Name + secretNameSuffix }

// HostfileName is the name of the TrainJob's hostfile ConfigMap.
func HostfileName(req *runtime.Request) string { return req.Name + hostfileCMSuffix }

// Validate rejects OpenMPI's variables (Open MPI 4's and 5's) in spec.trainer.env, a
// runtime numProcPerNode below 1, an MPI
// implementation other than OpenMPI, and more than one node on a runtime that
// runs the launcher as a node but lacks the launcher or the node job.
func (*MPI) Validate(info *runtime.Info, req *runtime.Request) field.ErrorList {
	pol := policy(info)
	if pol == nil {
		return nil
	}
	var errs field.ErrorList
	if err := checkImplementation(info, req, pol); err != nil {
		errs = append(errs, err)
	}
	if err := checkRuntimeSlots(info, req, pol); err != nil {
		errs = append(errs, err)
	}
	t := req.Trainer
	if t == nil {
		return errs
	}
	var bad []string
	for _, e := range t.Env {
		if slices.Contains(reserved, e.Name) {
			bad = append(bad, e.Name)
		}
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		bad = slices.Compact(bad)
		errs = append(errs, field.Invalid(req.Paths.Trainer.Child("env"), t.Env,
			fmt.Sprintf("must not have reserved envs, invalid envs configured: %v", bad)))
	}
	if t.NumNodes != nil && *t.NumNodes >= 2 && runLauncherAsNode(pol) &&
		(info.ReplicatedJob(LauncherJob) == nil || info.ReplicatedJob(NodeJob) == nil) {
		errs = append(errs, field.Invalid(req.Paths.Trainer.Child("numNodes"), *t.NumNodes,
			"must have 1 when MPI trainingRuntime with enabled runLauncherAsNode does not have either launcher and node"))
	}
	if t.NumProcPerNode != nil && t.NumProcPerNode.Type == intstr.String && t.NumProcPerNode.StrVal != runtime.ProcAuto {
		if _, err := slots(info, req, pol); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// checkImplementation: only OpenMPI is run; the launcher's settings are
// OpenMPI's (the CRD also admits "").
func checkImplementation(info *runtime.Info, req *runtime.Request, pol *trainer.MPIMLPolicySource) *field.Error {
	impl := ptr.Deref(pol.MPIImplementation, trainer.MPIImplementationOpenMPI)
	if impl == trainer.MPIImplementationOpenMPI || info.Container(LauncherJob, trainer.NodeContainer) == nil {
		return nil
	}
	return field.Invalid(req.Paths.Runtime, info.Runtime.Name,
		fmt.Sprintf("MPI implementation for %q is not supported: runtime %s %q must use mpiImplementation %s",
			impl, info.Runtime.Kind, info.Runtime.Name, trainer.MPIImplementationOpenMPI))
}

// checkRuntimeSlots: the runtime's numProcPerNode is at least 1 (the CRD
// says so since Kubeflow Trainer v2.4; a runtime stored before is reported at
// the TrainJob's reference, with the runtime's field path).
func checkRuntimeSlots(info *runtime.Info, req *runtime.Request, pol *trainer.MPIMLPolicySource) *field.Error {
	if pol.NumProcPerNode == nil {
		return nil
	}
	if err := runtime.CheckSlots(field.NewPath("spec", "mlPolicy", "mpi", "numProcPerNode"), *pol.NumProcPerNode); err != nil {
		return field.Invalid(req.Paths.Runtime, info.Runtime.Name,
			fmt.Sprintf("runtime %s %q: %v", info.Runtime.Kind, info.Runtime.Name, err))
	}
	return nil
}

// EnforceMLPolicy sizes the node job, mounts the SSH keys into both jobs'
// node containers and gives the launcher the hostfile and OpenMPI's settings.
func (*MPI) EnforceMLPolicy(info *runtime.Info, req *runtime.Request) error {
	pol := policy(info)
	if pol == nil {
		return nil
	}
	if err := checkImplementation(info, req, pol); err != nil {
		return err
	}
	slotsPerNode, err := slots(info, req, pol)
	if err != nil {
		return err
	}
	asNode := runLauncherAsNode(pol)
	t := req.Trainer

	// Counts: the TrainJob's numNodes counts the launcher when it runs ranks
	// too; the launcher itself keeps the runtime's count. numNodes 0 runs no
	// training node: neither node pods nor the launcher.
	none := t != nil && t.NumNodes != nil && *t.NumNodes == 0
	if t != nil && t.NumNodes != nil {
		n := *t.NumNodes
		if asNode && !none {
			n = max(n-1, 1)
		}
		if rj := info.ReplicatedJob(NodeJob); rj != nil {
			rj.Template.Spec.Parallelism = ptr.To(n)
			rj.Template.Spec.Completions = ptr.To(n)
		}
		if info.TrainerJob == NodeJob {
			info.NumNodes = n
		}
	}
	if info.TrainerJob != NodeJob {
		info.NumNodes = ptr.Deref(info.MLPolicy().NumNodes, 1)
		if none {
			info.NumNodes = 0
		}
	}

	// Kubeflow Trainer v2.4: the TrainJob's image runs on the node pods as well
	// as on the launcher (where the Info already has it), so that the ranks
	// mpirun starts over SSH find the same program. The command and args stay
	// the launcher's: the node pods run the SSH servers.
	if t != nil && t.Image != nil {
		if c := info.Container(NodeJob, trainer.NodeContainer); c != nil {
			c.Image = *t.Image
		}
	}

	mountPath := sshAuthMountPath(pol)
	for _, rjob := range []string{NodeJob, LauncherJob} {
		ps := info.PodSpec(rjob)
		if ps == nil {
			continue
		}
		ps.Volumes = runtime.UpsertVolumes(ps.Volumes, sshAuthVolume(req))
		if rjob == LauncherJob {
			ps.Volumes = runtime.UpsertVolumes(ps.Volumes, hostfileVolume(req))
		}
		c := info.Container(rjob, trainer.NodeContainer)
		if c == nil {
			continue
		}
		c.VolumeMounts = runtime.UpsertMounts(c.VolumeMounts, corev1.VolumeMount{Name: SSHAuthVolume, MountPath: mountPath})
		if rjob == LauncherJob {
			c.VolumeMounts = runtime.UpsertMounts(c.VolumeMounts, corev1.VolumeMount{Name: HostfileVolume, MountPath: HostfileDir})
			c.Env = envBeforeTrainer(info, c.Env, t, launcherEnv(slotsPerNode)...)
		}
	}

	// With the launcher as a node, the node pods run the same program: they
	// get the TrainJob's env and resources too (not its command: they run the
	// SSH servers).
	if asNode && info.TrainerJob != NodeJob && t != nil {
		if c := info.Container(NodeJob, trainer.NodeContainer); c != nil {
			c.Env = runtime.UpsertEnv(c.Env, t.Env...)
			if t.ResourcesPerNode != nil {
				c.Resources = runtime.MergeResources(c.Resources, *t.ResourcesPerNode)
			}
		}
	}
	return nil
}

func sshAuthVolume(req *runtime.Request) corev1.Volume {
	return corev1.Volume{Name: SSHAuthVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName:  SecretName(req),
		DefaultMode: ptr.To(secretDefaultMode),
		Items: []corev1.KeyToPath{
			{Key: corev1.SSHAuthPrivateKey, Path: PrivateKeyFile, Mode: ptr.To(privateKeyMode)},
			{Key: runtime.SSHPublicKeyKey, Path: PublicKeyFile, Mode: ptr.To(publicKeyMode)},
			{Key: runtime.SSHPublicKeyKey, Path: AuthorizedKeysFile, Mode: ptr.To(publicKeyMode)},
		},
	}}}
}

func hostfileVolume(req *runtime.Request) corev1.Volume {
	return corev1.Volume{Name: HostfileVolume, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: HostfileName(req)},
		Items:                []corev1.KeyToPath{{Key: HostfileKey, Path: HostfileKey, Mode: ptr.To(hostfileMode)}},
	}}}
}

// Build emits the hostfile ConfigMap (re-applied on every change) and the SSH
// key Secret (created once; its keys are made only then).
func (*MPI) Build(info *runtime.Info, req *runtime.Request) ([]plan.Child, error) {
	pol := policy(info)
	if pol == nil {
		return nil, nil
	}
	n, err := slots(info, req, pol)
	if err != nil {
		return nil, err
	}
	var hostfile strings.Builder
	for _, host := range Hosts(info, req, runLauncherAsNode(pol)) {
		fmt.Fprintf(&hostfile, "%s slots=%d\n", host, n)
	}
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: HostfileName(req), Namespace: req.Namespace},
		Data:       map[string]string{HostfileKey: hostfile.String()},
	}
	secret := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: SecretName(req), Namespace: req.Namespace},
		Type:       corev1.SecretTypeSSHAuth,
		Immutable:  ptr.To(true),
	}
	return []plan.Child{plan.Apply(cm), plan.CreateOnceWith(secret, runtime.FillSSHKeys)}, nil
}

// Hosts lists the DNS names mpirun starts ranks on: every pod of the node job,
// and of the launcher when it runs ranks too, in the runtime's job order.
// JobSet names a pod <jobset>-<replicated job>-<job index>-<pod index> under
// the JobSet's subdomain (the runtime's network.subdomain, else the JobSet's name).
func Hosts(info *runtime.Info, req *runtime.Request, withLauncher bool) []string {
	sub := req.Name
	if nw := info.Spec.Network; nw != nil && nw.Subdomain != "" {
		sub = nw.Subdomain
	}
	var hosts []string
	for _, rj := range info.Spec.ReplicatedJobs {
		if rj.Name != NodeJob && (rj.Name != LauncherJob || !withLauncher) {
			continue
		}
		replicas, pods := max(rj.Replicas, 1), ptr.Deref(rj.Template.Spec.Parallelism, 1)
		if rj.Name == info.TrainerJob {
			replicas, pods = 1, info.NumNodes // what the JobSet plugin renders
		}
		for r := range replicas {
			for p := range pods {
				hosts = append(hosts, fmt.Sprintf("%s-%s-%d-%d.%s", req.Name, rj.Name, r, p, sub))
			}
		}
	}
	return hosts
}
