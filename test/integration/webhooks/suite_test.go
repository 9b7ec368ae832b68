package webhooks

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/test/integration/framework"
)

var env *framework.Env

func TestMain(m *testing.M) {
	framework.Main(m, &env, framework.Options{Webhooks: true}, framework.WithManager(framework.ManagerOptions{}))
}

func ctx() context.Context { return context.Background() }

func newNamespace(t *testing.T) string { return framework.NewNamespace(t, env.Client, "wh") }

// runtimeSpec is a torch runtime with a trainer job "node" (container node and a
// sidecar "logger") and a dataset-initializer job.
func runtimeSpec() trainer.TrainingRuntimeSpec {
	job := func(ancestor string, containers ...string) batchv1.JobTemplateSpec {
		var t batchv1.JobTemplateSpec
		t.Labels = map[string]string{trainer.AncestorLabel: ancestor}
		for _, c := range containers {
			t.Spec.Template.Spec.Containers = append(t.Spec.Template.Spec.Containers, corev1.Container{Name: c, Image: "busybox"})
		}
		return t
	}
	return trainer.TrainingRuntimeSpec{
		MLPolicy: &trainer.MLPolicy{NumNodes: ptr.To[int32](1), MLPolicySource: trainer.MLPolicySource{Torch: &trainer.TorchMLPolicySource{}}},
		Template: trainer.JobSetTemplateSpec{Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{
			{Name: "dataset-initializer", Replicas: 1, Template: job(trainer.AncestorDatasetInitializer, "dataset-initializer")},
			{Name: "node", Replicas: 1, Template: job(trainer.AncestorTrainer, "node", "logger")},
		}}},
	}
}

func newRuntime(t *testing.T, ns, name string) {
	t.Helper()
	require.NoError(t, env.Client.Create(ctx(), &trainer.TrainingRuntime{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: runtimeSpec()}))
}

func job(ns, name string, mutate func(*trainer.TrainJob)) *trainer.TrainJob {
	j := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: "rt", Kind: ptr.To(trainer.TrainingRuntimeKind)},
			Trainer:    &trainer.Trainer{Image: ptr.To("example.com/train:v1"), NumNodes: ptr.To[int32](2)},
		},
	}
	if mutate != nil {
		mutate(j)
	}
	return j
}
