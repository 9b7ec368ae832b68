// Package trainjobstatus lets training code report its progress to the manager's
// status server (pkg/statusserver), as Kubeflow Trainer v2.3's TrainJobStatus
// feature does: every regular container of the trainer pods gets the server's
// URL, a service account token for this TrainJob's audience and the CA that
// signs the server's certificate, projected from the namespace's
// statusserver.CAConfigMapName (which statusserver.CAPublisher keeps; the
// plan has no child for it).
package trainjobstatus

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
	"github.com/trainyard/trainyard/pkg/statusserver"
)

// Name of the plugin.
const Name = "TrainJobStatus"

// What the trainer containers get (Kubeflow Trainer v2.3's names).
const (
	EnvURL    = "KUBEFLOW_TRAINER_SERVER_URL"
	EnvCACert = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
	EnvToken  = "KUBEFLOW_TRAINER_SERVER_TOKEN"

	VolumeName = "kubeflow-trainer-token"
	MountPath  = "/var/run/secrets/kubeflow/trainer"
	TokenFile  = "token"
	CAFile     = "ca.crt"

	// TokenExpirationSeconds: the kubelet renews a projected token at 80% of its life.
	TokenExpirationSeconds = 3600
)

// Config is what the manager knows about its status server. A nil Config
// turns the feature off: the plugin then does nothing.
type Config struct {
	// BaseURL is the server's scheme, host and port as trainer pods reach
	// it, e.g. https://trainyard-webhook.trainyard-system.svc:10443.
	BaseURL string
}

// Progress is the plugin.
type Progress struct {
	cfg *Config
}

var (
	_ framework.MLPolicyPlugin = (*Progress)(nil)
)

// New returns the plugin; cfg nil means the feature is off.
func New(cfg *Config) *Progress { return &Progress{cfg: cfg} }

// Name implements framework.Plugin.
func (*Progress) Name() string { return Name }

// URL is where TrainJob ns/name's trainers report.
func (c *Config) URL(ns, name string) string {
	return strings.TrimSuffix(c.BaseURL, "/") + statusserver.Path(ns, name)
}

// EnforceMLPolicy gives every regular container of the trainer pods the
// environment and the token volume, whatever the runtime's ML policy (a
// runtime with no trainer job gets nothing).
func (p *Progress) EnforceMLPolicy(info *runtime.Info, req *runtime.Request) error {
	if p.cfg == nil {
		return nil
	}
	ps := info.PodSpec(info.TrainerJob)
	if ps == nil {
		return nil
	}
	ps.Volumes = runtime.UpsertVolumes(ps.Volumes, Volume(req))
	// As in Kubeflow Trainer, the names are not reserved: a value the
	// TrainJob sets in spec.trainer.env wins (e.g. a trainer that reports to
	// a proxy).
	var env []corev1.EnvVar
	for _, e := range []corev1.EnvVar{
		{Name: EnvURL, Value: p.cfg.URL(req.Namespace, req.Name)},
		{Name: EnvCACert, Value: MountPath + "/" + CAFile},
		{Name: EnvToken, Value: MountPath + "/" + TokenFile},
	} {
		if !userSets(req, e.Name) {
			env = append(env, e)
		}
	}
	for k := range ps.Containers {
		c := &ps.Containers[k]
		c.Env = runtime.UpsertEnv(c.Env, env...)
		c.VolumeMounts = runtime.UpsertMounts(c.VolumeMounts, corev1.VolumeMount{Name: VolumeName, MountPath: MountPath, ReadOnly: true})
	}
	return nil
}

// Volume is the projected volume of a TrainJob's trainer pods: a token for
// the job's audience, and the CA from the namespace's ConfigMap. The kubelet
// waits for that ConfigMap before it starts the pod, and refreshes the file
// when the CA rotates.
func Volume(req *runtime.Request) corev1.Volume {
	return corev1.Volume{Name: VolumeName, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
				Audience:          statusserver.Audience(req.Namespace, req.Name),
				ExpirationSeconds: ptr.To[int64](TokenExpirationSeconds),
				Path:              TokenFile,
			}},
			{ConfigMap: &corev1.ConfigMapProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: statusserver.CAConfigMapName},
				Items:                []corev1.KeyToPath{{Key: statusserver.CAKey, Path: CAFile}},
			}},
		},
	}}}
}

// userSets says whether the TrainJob's spec.trainer.env sets a variable.
func userSets(req *runtime.Request, name string) bool {
	if req.Trainer == nil {
		return false
	}
	for _, e := range req.Trainer.Env {
		if e.Name == name {
			return true
		}
	}
	return false
}
