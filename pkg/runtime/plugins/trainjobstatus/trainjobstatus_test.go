package trainjobstatus_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/trainjobstatus"
	"github.com/trainyard/trainyard/pkg/statusserver"
	rtt "github.com/trainyard/trainyard/test/util/rtt"
)

var cfg = &trainjobstatus.Config{
	BaseURL: "https://trainyard-webhook.trainyard-system.svc:10443/",
}

func job() *trainer.TrainJob {
	return &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "mnist", Namespace: "team"}}
}

// wantVolume is the projected volume of the facts note, written out.
var wantVolume = corev1.Volume{Name: "kubeflow-trainer-token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
	Sources: []corev1.VolumeProjection{
		{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
			Audience: "trainer.kubeflow.org/v1alpha1/namespaces/team/trainjobs/mnist/status", ExpirationSeconds: ptr.To[int64](3600), Path: "token"}},
		{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "trainyard-status-server-ca"},
			Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
	},
}}}

var wantEnv = []corev1.EnvVar{
	{Name: "KUBEFLOW_TRAINER_SERVER_URL", Value: "https://trainyard-webhook.trainyard-system.svc:10443/apis/trainer.kubeflow.org/v1alpha1/namespaces/team/trainjobs/mnist/status"},
	{Name: "KUBEFLOW_TRAINER_SERVER_CA_CERT", Value: "/var/run/secrets/kubeflow/trainer/ca.crt"},
	{Name: "KUBEFLOW_TRAINER_SERVER_TOKEN", Value: "/var/run/secrets/kubeflow/trainer/token"},
}

var wantMount = corev1.VolumeMount{Name: "kubeflow-trainer-token", MountPath: "/var/run/secrets/kubeflow/trainer", ReadOnly: true}

func TestEnforceMLPolicy(t *testing.T) {
	sidecar := rtt.MakeContainer("sidecar", "busybox")
	sidecar.Env = []corev1.EnvVar{rtt.Env("KEEP", "1")}
	node := rtt.MakeContainer(trainer.NodeContainer, "torch")
	node.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	rt := rtt.MakeRuntime(trainer.ClusterTrainingRuntimeKind, "torch").ReplicatedJobs(
		rtt.MakeReplicatedJob("dataset-initializer", trainer.AncestorDatasetInitializer, rtt.MakeContainer("dataset-initializer", "init")),
		rtt.MakeReplicatedJob("node", trainer.AncestorTrainer, node, sidecar),
	).Obj()
	noTrainer := rtt.MakeRuntime(trainer.ClusterTrainingRuntimeKind, "plain").ReplicatedJobs(
		rtt.MakeReplicatedJob("other", "", rtt.MakeContainer("other", "x"))).Obj()

	cases := map[string]struct {
		cfg     *trainjobstatus.Config
		rt      *runtime.Runtime
		want    map[string]corev1.PodSpec // by replicated job
		wantErr bool
	}{
		"every regular container of the trainer job, nothing elsewhere": {
			cfg: cfg, rt: rt,
			want: map[string]corev1.PodSpec{
				"dataset-initializer": {Containers: []corev1.Container{rtt.MakeContainer("dataset-initializer", "init")}},
				"node": {
					Volumes: []corev1.Volume{wantVolume},
					Containers: []corev1.Container{
						{Name: "node", Image: "torch", Env: wantEnv, VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, wantMount}},
						{Name: "sidecar", Image: "busybox", Env: append([]corev1.EnvVar{rtt.Env("KEEP", "1")}, wantEnv...), VolumeMounts: []corev1.VolumeMount{wantMount}},
					},
				},
			},
		},
		"feature off: nothing": {
			rt: rt,
			want: map[string]corev1.PodSpec{
				"dataset-initializer": {Containers: []corev1.Container{rtt.MakeContainer("dataset-initializer", "init")}},
				"node":                {Containers: []corev1.Container{node, sidecar}},
			},
		},
		"no trainer job: nothing": {
			cfg: cfg, rt: noTrainer,
			want: map[string]corev1.PodSpec{"other": {Containers: []corev1.Container{rtt.MakeContainer("other", "x")}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			info, err := runtime.NewInfo(runtime.TrainJobRequest(job()), tc.rt)
			if err != nil {
				t.Fatal(err)
			}
			if err := trainjobstatus.New(tc.cfg).EnforceMLPolicy(info, runtime.TrainJobRequest(job())); err != nil {
				t.Fatal(err)
			}
			got := map[string]corev1.PodSpec{}
			for _, rj := range info.Spec.ReplicatedJobs {
				ps := rj.Template.Spec.Template.Spec
				got[rj.Name] = corev1.PodSpec{Volumes: ps.Volumes, Containers: ps.Containers}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("pod specs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEnforceMLPolicyReplacesUserVolume(t *testing.T) {
	node := rtt.MakeContainer(trainer.NodeContainer, "torch")
	node.VolumeMounts = []corev1.VolumeMount{{Name: "kubeflow-trainer-token", MountPath: "/elsewhere"}}
	rj := rtt.MakeReplicatedJob("node", trainer.AncestorTrainer, node)
	rj.Template.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "kubeflow-trainer-token", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	info, err := runtime.NewInfo(runtime.TrainJobRequest(job()), rtt.MakeRuntime(trainer.ClusterTrainingRuntimeKind, "torch").ReplicatedJobs(rj).Obj())
	if err != nil {
		t.Fatal(err)
	}
	if err := trainjobstatus.New(cfg).EnforceMLPolicy(info, runtime.TrainJobRequest(job())); err != nil {
		t.Fatal(err)
	}
	ps := info.PodSpec("node")
	if diff := cmp.Diff([]corev1.Volume{wantVolume}, ps.Volumes); diff != "" {
		t.Errorf("volumes (-want +got):\n%s", diff)
	}
	// Mounts merge by path (Kubeflow Trainer's rule): the runtime's own mount
	// stays, now of the projected volume, and the plugin's is added.
	wantMounts := []corev1.VolumeMount{{Name: "kubeflow-trainer-token", MountPath: "/elsewhere"}, wantMount}
	if diff := cmp.Diff(wantMounts, ps.Containers[0].VolumeMounts); diff != "" {
		t.Errorf("mounts (-want +got):\n%s", diff)
	}
}

// TestNoChild: the CA ConfigMap the volume names is the namespace's, kept by
// statusserver.CAPublisher, so that a TrainJob costs no write for it; the
// plugin plans no child and watches none.
func TestNoChild(t *testing.T) {
	var p any = trainjobstatus.New(cfg)
	if _, ok := p.(framework.BuildPlugin); ok {
		t.Error("the plugin builds children; want none (one CA ConfigMap per namespace, not per job)")
	}
	if _, ok := p.(framework.OwnerPlugin); ok {
		t.Error("the plugin owns a kind; want none")
	}
	if got := wantVolume.Projected.Sources[1].ConfigMap.Name; got != statusserver.CAConfigMapName {
		t.Errorf("volume's ConfigMap = %q, want the publisher's %q", got, statusserver.CAConfigMapName)
	}
}

func TestUserEnvWins(t *testing.T) {
	// As upstream: the names are not reserved, and a TrainJob's value wins.
	j := job()
	j.Spec.Trainer = &trainer.Trainer{Env: []corev1.EnvVar{rtt.Env("LR", "0.1"), rtt.Env("KUBEFLOW_TRAINER_SERVER_TOKEN", "/mine")}}
	rt := rtt.MakeRuntime(trainer.ClusterTrainingRuntimeKind, "torch").ReplicatedJobs(
		rtt.MakeReplicatedJob("node", trainer.AncestorTrainer, rtt.MakeContainer(trainer.NodeContainer, "torch"))).Obj()
	info, err := runtime.NewInfo(runtime.TrainJobRequest(j), rt)
	if err != nil {
		t.Fatal(err)
	}
	if err := trainjobstatus.New(cfg).EnforceMLPolicy(info, runtime.TrainJobRequest(j)); err != nil {
		t.Fatal(err)
	}
	var got []corev1.EnvVar
	for _, e := range info.TrainerContainer().Env {
		if e.Name != "LR" {
			got = append(got, e)
		}
	}
	// NewInfo put the TrainJob's env in the trainer container first.
	want := append([]corev1.EnvVar{rtt.Env("KUBEFLOW_TRAINER_SERVER_TOKEN", "/mine")}, wantEnv[:2]...)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("trainer env (-want +got):\n%s", diff)
	}
}
