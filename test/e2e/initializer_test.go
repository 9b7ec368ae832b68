package e2e

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// torchtuneStyleRuntime has the shape of upstream's torchtune runtimes: a
// dataset and a model initializer writing into the shared "initializer"
// volume, and the node job waiting for both to complete.
func torchtuneStyleRuntime(ns string) *trainer.TrainingRuntime {
	mount := []corev1.VolumeMount{{Name: "initializer", MountPath: "/workspace"}}
	volumes := []corev1.Volume{{Name: "initializer", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	job := func(name, ancestor, image string, env ...corev1.EnvVar) jobsetv1alpha2.ReplicatedJob {
		return jobsetv1alpha2.ReplicatedJob{Name: name, Replicas: 1, Template: batchv1.JobTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{trainer.AncestorLabel: ancestor}},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: name, Image: image, Env: env, VolumeMounts: mount}},
				Volumes:    volumes,
			}}},
		}}
	}
	node := job("node", trainer.AncestorTrainer, "ghcr.io/kubeflow/trainer/torchtune-trainer")
	node.Template.Spec.Template.Spec.Containers[0].Command = []string{"tune", "run"}
	node.DependsOn = []jobsetv1alpha2.DependsOn{
		{Name: "dataset-initializer", Status: jobsetv1alpha2.DependencyComplete},
		{Name: "model-initializer", Status: jobsetv1alpha2.DependencyComplete},
	}
	return &trainer.TrainingRuntime{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "torchtune-style", Labels: map[string]string{trainer.FrameworkLabel: "torchtune"}},
		Spec: trainer.TrainingRuntimeSpec{
			MLPolicy: &trainer.MLPolicy{NumNodes: ptr.To[int32](1), MLPolicySource: trainer.MLPolicySource{Torch: &trainer.TorchMLPolicySource{}}},
			Template: trainer.JobSetTemplateSpec{Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{
				job("dataset-initializer", trainer.AncestorDatasetInitializer, "ghcr.io/kubeflow/trainer/dataset-initializer",
					corev1.EnvVar{Name: "STORAGE_URI", Value: "hf://runtime/default"}),
				job("model-initializer", trainer.AncestorModelInitializer, "ghcr.io/kubeflow/trainer/model-initializer"),
				node,
			}}}},
	}
}

// A TrainJob with both initializers on a torchtune-style runtime renders as
// Kubeflow Trainer renders it: STORAGE_URI from storageUri (replacing the
// runtime's), the initializer env upserted after it, the secretRef as envFrom,
// each initializer job run once, the node's dependsOn kept; and it runs
// (initializers first) to Complete.
func TestInitializersRenderPerUpstream(t *testing.T) {
	ns := newNamespace(t)
	if err := cli.Create(ctx(), torchtuneStyleRuntime(ns)); err != nil {
		t.Fatal(err)
	}
	job := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tune"},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: "torchtune-style", Kind: ptr.To(trainer.TrainingRuntimeKind)},
			Initializer: &trainer.Initializer{
				Dataset: &trainer.DatasetInitializer{StorageUri: ptr.To("hf://tatsu-lab/alpaca/data"),
					Env: []corev1.EnvVar{{Name: "IGNORE_PATTERNS", Value: "*.md"}}},
				Model: &trainer.ModelInitializer{StorageUri: ptr.To("hf://meta-llama/Llama-3.2-1B-Instruct"),
					SecretRef: &corev1.LocalObjectReference{Name: "hf-token"}},
			},
		},
	}
	if err := cli.Create(ctx(), job); err != nil {
		t.Fatal(err)
	}
	var js jobsetv1alpha2.JobSet
	waitFor(t, short, func() error { return cli.Get(ctx(), client.ObjectKeyFromObject(job), &js) })

	type rendered struct {
		Replicas  int32
		Env       []corev1.EnvVar
		EnvFrom   []corev1.EnvFromSource
		DependsOn []jobsetv1alpha2.DependsOn
	}
	got := map[string]rendered{}
	for _, rj := range js.Spec.ReplicatedJobs {
		if rj.Name == "node" {
			got[rj.Name] = rendered{Replicas: rj.Replicas, DependsOn: rj.DependsOn}
			continue
		}
		c := rj.Template.Spec.Template.Spec.Containers[0]
		got[rj.Name] = rendered{Replicas: rj.Replicas, Env: c.Env, EnvFrom: c.EnvFrom, DependsOn: rj.DependsOn}
	}
	want := map[string]rendered{
		"dataset-initializer": {Replicas: 1, Env: []corev1.EnvVar{
			{Name: "STORAGE_URI", Value: "hf://tatsu-lab/alpaca/data"}, {Name: "IGNORE_PATTERNS", Value: "*.md"}}},
		"model-initializer": {Replicas: 1, Env: []corev1.EnvVar{{Name: "STORAGE_URI", Value: "hf://meta-llama/Llama-3.2-1B-Instruct"}},
			EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "hf-token"}}}}},
		"node": {Replicas: 1, DependsOn: []jobsetv1alpha2.DependsOn{
			{Name: "dataset-initializer", Status: jobsetv1alpha2.DependencyComplete},
			{Name: "model-initializer", Status: jobsetv1alpha2.DependencyComplete}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rendered JobSet (-upstream +got):\n%s", diff)
	}
	done := waitState(t, ns, job.Name, trainer.TrainJobCompletePhase, "", long)
	checkConditions(t, done, upstreamCondition{trainer.TrainJobComplete, metav1.ConditionTrue, "AllJobsCompleted", "jobset completed successfully"})
}
