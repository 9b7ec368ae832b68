package webhooks

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// Bad TrainJobs on XGBoost, Flux and torchtune runtimes are rejected by the
// webhook with Kubeflow Trainer's field paths and messages.
func TestBadFrameworkTrainJobsAreRejected(t *testing.T) {
	ns := newNamespace(t)
	runtimes := map[string]func(*trainer.TrainingRuntimeSpec){
		"xgb":  func(s *trainer.TrainingRuntimeSpec) { s.MLPolicy.XGBoost = &trainer.XGBoostMLPolicySource{} },
		"flux": func(s *trainer.TrainingRuntimeSpec) { s.MLPolicy.Flux = &trainer.FluxMLPolicySource{} },
		"flux-own-installer": func(s *trainer.TrainingRuntimeSpec) {
			s.MLPolicy.Flux = &trainer.FluxMLPolicySource{}
			s.Template.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "flux-installer", Image: "busybox"}}
		},
		"torchtune-llama3.2-1b": func(s *trainer.TrainingRuntimeSpec) { s.MLPolicy.Torch = &trainer.TorchMLPolicySource{} },
		"torchtune-mistral-7b":  func(s *trainer.TrainingRuntimeSpec) { s.MLPolicy.Torch = &trainer.TorchMLPolicySource{} },
	}
	for name, mutate := range runtimes {
		spec := runtimeSpec()
		spec.MLPolicy.Torch = nil
		mutate(&spec)
		require.NoError(t, env.Client.Create(ctx(), &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}))
	}
	on := func(rt string, mutate func(*trainer.TrainJob)) *trainer.TrainJob {
		return job(ns, "a", func(j *trainer.TrainJob) {
			j.Spec.RuntimeRef.Name = rt
			if mutate != nil {
				mutate(j)
			}
		})
	}
	tune := func(j *trainer.TrainJob) { j.Spec.Trainer.Command = []string{"tune", "run"} }
	cases := []struct {
		name   string
		job    *trainer.TrainJob
		field  string
		detail string
	}{
		{"XGBoost reserved env", on("xgb", func(j *trainer.TrainJob) {
			j.Spec.Trainer.Env = []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "DMLC_NUM_WORKER", Value: "8"}}
		}), "spec.trainer.env[1]", "Forbidden: DMLC_NUM_WORKER is reserved for the XGBoost runtime"},
		// 0 never gets here: the CRD's CEL rule rejects it first.
		{"Flux numProcPerNode that is not a number", on("flux", func(j *trainer.TrainJob) {
			j.Spec.Trainer.NumProcPerNode = ptr.To(intstr.FromString("auto"))
		}), "spec.trainer.numProcPerNode", "must be an integer for Flux TrainJob"},
		{"Flux runtime with its own flux-installer", on("flux-own-installer", nil),
			"spec.trainer.initContainers", "InitContainer 'flux-installer' is reserved"},
		{"torchtune model Trainyard does not know", on("torchtune-mistral-7b", tune),
			"spec.runtimeRef.name", "must have a supported pretrained model, invalid model configured: mistral/7B"},
		{"torchtune 1B on two nodes", on("torchtune-llama3.2-1b", tune),
			"spec.trainer.numNodes", "must be 1 for llama3_2/1B model"},
		{"torchtune args that override the runtime's paths", on("torchtune-llama3.2-1b", func(j *trainer.TrainJob) {
			tune(j)
			j.Spec.Trainer.NumNodes = nil
			j.Spec.Trainer.Args = []string{"output_dir=/tmp/out"}
		}), "spec.trainer.args[0]", `must not set immutable config "output_dir" in trainer args; it is managed by the runtime`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			requireFieldError(t, env.Client.Create(ctx(), tc.job), tc.field, tc.detail)
		})
	}
	// The same names and commands are fine where they do not apply.
	require.NoError(t, env.Client.Create(ctx(), on("flux", func(j *trainer.TrainJob) {
		j.Spec.Trainer.Env = []corev1.EnvVar{{Name: "DMLC_NUM_WORKER", Value: "8"}}
		j.Spec.Trainer.NumProcPerNode = ptr.To(intstr.FromInt32(2))
	})))
}
