// Package flux runs a TrainJob's command under the Flux framework
// (flux-framework.org): an init container copies Flux into the pods, every pod
// of the node job starts one Flux broker, and the first pod runs the command
// with `flux run` across all of them. The brokers find each other through the
// JobSet's pod DNS names and authenticate with a CURVE certificate whose key
// pair is made at random for the TrainJob when its Secret is created.
package flux

// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;patch
// The CURVE Secret is created once and never patched (FillCurveCert).
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create

import (
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/plan"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
)

// Name of the plugin.
const Name = "Flux"

// NodeJob is the replicated job whose pods run the brokers (Kubeflow Trainer
// uses the job named "node", whatever the trainer label says).
const NodeJob = "node"

// InstallerContainer is the init container that copies Flux into the pods; a
// runtime must not have its own of that name.
const InstallerContainer = "flux-installer"

// The settings a runtime (a literal env of its node container) or a TrainJob
// (spec.trainer.env) may change; the TrainJob wins.
const (
	EnvViewImage     = "FLUX_VIEW_IMAGE"
	EnvNetworkDevice = "FLUX_NETWORK_DEVICE"
	EnvQueuePolicy   = "FLUX_QUEUE_POLICY"
)

var defaults = map[string]string{
	EnvViewImage:     "ghcr.io/converged-computing/flux-view-ubuntu:tag-jammy",
	EnvNetworkDevice: "eth0",
	EnvQueuePolicy:   "fcfs",
}

// Volume names; the entrypoint volume is named after its ConfigMap.
const (
	volSpack     = "spack-install"
	volInstall   = "flux-install"
	volSharedMem = "shared-memory"
	volCurve     = "flux-curve"
)

// EntrypointConfigMap and CurveSecret name the plugin's children.
func EntrypointConfigMap(job string) string { return job + "-flux-entrypoint" }

// CurveSecret names the Secret with the brokers' CURVE certificate.
func CurveSecret(job string) string { return job + "-flux-curve" }

// Flux is the plugin.
type Flux struct {
	// ClusterDomain completes the brokers' addresses
	// (<pod>.<subdomain>.<namespace>.svc.<domain>; plugins.Ordered passes
	// the manager's).
	ClusterDomain string
}

var (
	_ framework.ValidatePlugin = (*Flux)(nil)
	_ framework.MLPolicyPlugin = (*Flux)(nil)
	_ framework.PolicyClaimer  = (*Flux)(nil)
	_ framework.BuildPlugin    = (*Flux)(nil)
	_ framework.OwnerPlugin    = (*Flux)(nil)
)

// New returns the plugin for a cluster whose DNS domain is cluster.local.
func New() *Flux { return &Flux{ClusterDomain: runtime.DefaultClusterDomain} }

// Name implements framework.Plugin.
func (*Flux) Name() string { return Name }

// ClaimsMLPolicies implements framework.PolicyClaimer.
func (*Flux) ClaimsMLPolicies() []string { return []string{"flux"} }

// Owns implements framework.OwnerPlugin.
func (*Flux) Owns() []client.Object { return []client.Object{&corev1.ConfigMap{}, &corev1.Secret{}} }

func policy(info *runtime.Info) *trainer.FluxMLPolicySource {
	if mp := info.MLPolicy(); mp != nil {
		return mp.Flux
	}
	return nil
}

// Validate rejects a process count below 1, a runtime that already has an
// init container of the installer's name (Kubeflow Trainer's messages and
// paths), and a runtime without the node job and container the brokers run in.
func (*Flux) Validate(info *runtime.Info, req *runtime.Request) field.ErrorList {
	if policy(info) == nil {
		return nil
	}
	var errs field.ErrorList
	if t := req.Trainer; t != nil && t.NumProcPerNode != nil {
		path := req.Paths.Trainer.Child("numProcPerNode")
		switch v := *t.NumProcPerNode; {
		case v.Type == intstr.String:
			errs = append(errs, field.Invalid(path, v.StrVal, "must be an integer for Flux TrainJob"))
		case v.IntVal < 1:
			errs = append(errs, field.Invalid(path, v.IntVal, "must be greater than or equal to 1 for Flux TrainJob"))
		}
	}
	ps := info.PodSpec(NodeJob)
	if ps != nil {
		for _, ic := range ps.InitContainers {
			if ic.Name == InstallerContainer {
				errs = append(errs, field.Invalid(req.Paths.Trainer.Child("initContainers"), ic.Name,
					fmt.Sprintf("InitContainer '%s' is reserved", InstallerContainer)))
			}
		}
	}
	// The entrypoint volume is named after its ConfigMap, and volume names are DNS labels.
	if vol := EntrypointConfigMap(req.Name); len(vol) > validation.DNS1123LabelMaxLength {
		errs = append(errs, field.Invalid(req.Paths.Name, req.Name,
			fmt.Sprintf("must be no more than %d characters on a Flux runtime: the volume %s must fit in %d characters",
				validation.DNS1123LabelMaxLength-len(EntrypointConfigMap("")), vol, validation.DNS1123LabelMaxLength)))
	}
	c := info.Container(NodeJob, trainer.NodeContainer)
	if c == nil {
		errs = append(errs, field.Invalid(req.Paths.Runtime, info.Runtime.Name,
			fmt.Sprintf("flux runtime %s %q has no replicated job %q with a %q container", info.Runtime.Kind, info.Runtime.Name,
				NodeJob, trainer.NodeContainer)))
		return errs
	}
	return append(errs, validateSettings(info, req, settings(c))...)
}

// safeSetting is what FLUX_QUEUE_POLICY and FLUX_NETWORK_DEVICE may hold:
// the init script writes them into the broker's TOML inside a shell heredoc,
// so a quote, a newline or a "$" must never reach it. Queue policies (fcfs,
// easy, hybrid, conservative) and network interface names fit.
var safeSetting = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// validateSettings checks the settings that reach the scripts, naming where
// each bad value was set: the TrainJob's spec.trainer.env, else the runtime.
func validateSettings(info *runtime.Info, req *runtime.Request, set map[string]string) field.ErrorList {
	var errs field.ErrorList
	for _, name := range []string{EnvQueuePolicy, EnvNetworkDevice} {
		v := set[name]
		if safeSetting.MatchString(v) {
			continue
		}
		msg := fmt.Sprintf("%s must be 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit: it is written into the Flux broker's configuration", name)
		path, value, fromJob := req.Paths.Runtime, any(info.Runtime.Name), false
		if t := req.Trainer; t != nil {
			for i, e := range t.Env {
				if e.Name == name {
					path, value, fromJob = req.Paths.Trainer.Child("env").Index(i).Child("value"), e.Value, true
				}
			}
		}
		if !fromJob {
			msg = fmt.Sprintf("the runtime's %s %q: %s", name, v, msg)
		}
		errs = append(errs, field.Invalid(path, value, msg))
	}
	return errs
}

// settings resolves the FLUX_* settings from the node container's env, where
// the runtime's literal values are already overlaid by spec.trainer.env.
func settings(c *corev1.Container) map[string]string {
	out := map[string]string{}
	for k, v := range defaults {
		out[k] = v
	}
	for _, e := range c.Env {
		if _, ok := defaults[e.Name]; ok && e.ValueFrom == nil {
			out[e.Name] = e.Value
		}
	}
	return out
}

// tasks is the number of Flux tasks per node: the TrainJob's numProcPerNode,
// else the runtime's (CRD default 1).
func tasks(pol *trainer.FluxMLPolicySource, req *runtime.Request) int32 {
	if t := req.Trainer; t != nil && t.NumProcPerNode != nil && t.NumProcPerNode.Type == intstr.Int {
		return t.NumProcPerNode.IntVal
	}
	return max(ptr.Deref(pol.NumProcPerNode, 1), 1)
}

// EnforceMLPolicy wraps the trainer's command in the entrypoint and adds the
// installer, the volumes and the mounts to the node job. The node count is the
// TrainJob's (set before the plugins run); Flux adds no port: the brokers
// listen on 8050 inside the JobSet's headless Service, which needs none.
func (*Flux) EnforceMLPolicy(info *runtime.Info, req *runtime.Request) error {
	if policy(info) == nil {
		return nil
	}
	ps, c := info.PodSpec(NodeJob), info.Container(NodeJob, trainer.NodeContainer)
	if c == nil {
		return field.Invalid(req.Paths.Runtime, info.Runtime.Name,
			fmt.Sprintf("flux runtime has no replicated job %q with a %q container", NodeJob, trainer.NodeContainer))
	}
	set := settings(c)

	if tc := info.TrainerContainer(); tc != nil {
		// The command runs as one string given to the entrypoint. The TrainJob's
		// args are part of it; the runtime's own args stay where they were.
		cmd := tc.Command
		var args []string
		if t := req.Trainer; t != nil && t.Args != nil {
			args = t.Args
			tc.Args = nil
			if rc := runtime.TrainerContainer(&info.Runtime.Spec.Template.Spec); rc != nil {
				tc.Args = append([]string(nil), rc.Args...)
			}
		}
		original := strings.TrimSpace(strings.Join(append(append([]string(nil), cmd...), args...), " "))
		tc.Command = []string{"/bin/bash", configDir + "/" + entrypointKey, original}
	}

	entry := EntrypointConfigMap(req.Name)
	ps.Volumes = runtime.UpsertVolumes(ps.Volumes,
		corev1.Volume{Name: volSpack, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		corev1.Volume{Name: volInstall, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		corev1.Volume{Name: entry, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: entry}, DefaultMode: ptr.To[int32](0o755)}}},
		corev1.Volume{Name: volSharedMem, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
		corev1.Volume{Name: volCurve, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: CurveSecret(req.Name), DefaultMode: ptr.To[int32](0o400)}}},
	)
	if !hasInitContainer(ps, InstallerContainer) {
		ps.InitContainers = append(ps.InitContainers, corev1.Container{
			Name:    InstallerContainer,
			Image:   set[EnvViewImage],
			Command: []string{"/bin/bash", configDir + "/" + initKey},
			VolumeMounts: []corev1.VolumeMount{
				{Name: volInstall, MountPath: fluxRoot},
				{Name: entry, MountPath: configDir, ReadOnly: true},
			},
		})
	}
	c.VolumeMounts = runtime.UpsertMounts(c.VolumeMounts,
		corev1.VolumeMount{Name: volInstall, MountPath: fluxRoot},
		corev1.VolumeMount{Name: volSpack, MountPath: softwareDir},
		corev1.VolumeMount{Name: entry, MountPath: configDir, ReadOnly: true},
		corev1.VolumeMount{Name: volCurve, MountPath: curveDir, ReadOnly: true},
		corev1.VolumeMount{Name: volSharedMem, MountPath: "/dev/shm", ReadOnly: true},
	)
	return nil
}

// Build emits the entrypoint ConfigMap, re-applied whenever its rendering
// changes, and the CURVE Secret, created once: Build leaves its data empty and
// its BeforeCreate (FillCurveCert) makes a random key pair when the syncer
// creates it. Both render the same bytes for the same inputs.
func (f *Flux) Build(info *runtime.Info, req *runtime.Request) ([]plan.Child, error) {
	pol := policy(info)
	c := info.Container(NodeJob, trainer.NodeContainer)
	if pol == nil || c == nil {
		return nil, nil
	}
	set := settings(c)
	sub := info.Subdomain(req)
	domain := f.ClusterDomain
	nodes := info.NumNodes
	if rj := info.ReplicatedJob(NodeJob); rj != nil && NodeJob != info.TrainerJob {
		nodes = ptr.Deref(rj.Template.Spec.Parallelism, 1)
	}
	hostPrefix := fmt.Sprintf("%s-%s-0-", req.Name, NodeJob)
	hostlist := hostPrefix + "[0]"
	if nodes > 1 {
		hostlist = fmt.Sprintf("%s[0-%d]", hostPrefix, nodes-1)
	}
	scripts, err := renderScripts(scriptParams{
		Job: req.Name, Namespace: req.Namespace, Subdomain: sub, ClusterDomain: domain,
		Hostlist: hostlist, LeadHost: hostPrefix + "0", Nodes: nodes, Tasks: tasks(pol, req),
		GPUs: runtime.GPUs(c.Resources), NetworkDevice: set[EnvNetworkDevice], QueuePolicy: set[EnvQueuePolicy],
	})
	if err != nil {
		return nil, fmt.Errorf("flux entrypoint of TrainJob %s: %w", req.Name, err)
	}
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: EntrypointConfigMap(req.Name), Namespace: req.Namespace},
		Data:       scripts,
	}
	sec := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: CurveSecret(req.Name), Namespace: req.Namespace},
		Type:       corev1.SecretTypeOpaque,
	}
	return []plan.Child{plan.Apply(cm), plan.CreateOnceWith(sec, FillCurveCert(req.Name))}, nil
}

func hasInitContainer(ps *corev1.PodSpec, name string) bool {
	for _, c := range ps.InitContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}
