package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

func limits(kv ...string) corev1.ResourceRequirements {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return corev1.ResourceRequirements{Limits: l}
}

func TestDevice(t *testing.T) {
	cases := []struct {
		name          string
		res           corev1.ResourceRequirements
		device, count string
	}{
		{"no limits", corev1.ResourceRequirements{}, Unknown, Unknown},
		{"requests only", corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}, Unknown, Unknown},
		{"memory only", limits("memory", "1Gi"), Unknown, Unknown},
		{"cpu", limits("cpu", "2", "memory", "4Gi"), "cpu", "2"},
		{"fractional cpu", limits("cpu", "500m"), "cpu", "500m"},
		{"gpu wins over cpu", limits("cpu", "8", "nvidia.com/gpu", "4"), "gpu", "4"},
		{"tpu", limits("cpu", "8", "google.com/tpu", "8"), "tpu", "8"},
		{"mig", limits("cpu", "4", "nvidia.com/mig-1g.5gb", "2"), "mig-1g.5gb", "2"},
		{"other gpu vendor is not a known device", limits("amd.com/gpu", "1"), Unknown, Unknown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, c := Device(tc.res)
			if diff := cmp.Diff([]string{tc.device, tc.count}, []string{d, c}); diff != "" {
				t.Errorf("Device (-want +got):\n%s", diff)
			}
		})
	}
}

// runtimeSpec is a runtime whose trainer job "node" has a node container with res.
func runtimeSpec(mp *trainer.MLPolicy, res corev1.ResourceRequirements) trainer.TrainingRuntimeSpec {
	return trainer.TrainingRuntimeSpec{MLPolicy: mp, Template: trainer.JobSetTemplateSpec{Spec: jobsetv1alpha2.JobSetSpec{
		ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{
			Name: "node",
			Template: batchv1.JobTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{trainer.AncestorLabel: trainer.AncestorTrainer}},
				Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "sidecar", Resources: limits("cpu", "1")}, {Name: "node", Image: "img", Resources: res}},
				}}},
			},
		}},
	}}}
}

func TestNewRuntime(t *testing.T) {
	torch := &trainer.TorchMLPolicySource{}
	cases := []struct {
		name string
		spec trainer.TrainingRuntimeSpec
		want Runtime
	}{
		{
			name: "no ML policy: one node, python3, device from the node container",
			spec: runtimeSpec(nil, limits("cpu", "2")),
			want: Runtime{NumNodes: 1, Device: "cpu", DeviceCount: "2", Image: "img", Entrypoint: "python3"},
		},
		{
			name: "torch: count times nodes",
			spec: runtimeSpec(&trainer.MLPolicy{NumNodes: ptr.To[int32](3), MLPolicySource: trainer.MLPolicySource{Torch: torch}}, limits("nvidia.com/gpu", "2")),
			want: Runtime{NumNodes: 3, Device: "gpu", DeviceCount: "6", Image: "img", Entrypoint: "torchrun"},
		},
		{
			name: "torch numProcPerNode integer is the count per node",
			spec: runtimeSpec(&trainer.MLPolicy{NumNodes: ptr.To[int32](2), MLPolicySource: trainer.MLPolicySource{
				Torch: &trainer.TorchMLPolicySource{NumProcPerNode: ptr.To(intstr.FromInt32(4))}}}, limits("cpu", "8")),
			want: Runtime{NumNodes: 2, Device: "cpu", DeviceCount: "8", Image: "img", Entrypoint: "torchrun"},
		},
		{
			name: "torch numProcPerNode auto keeps the limit",
			spec: runtimeSpec(&trainer.MLPolicy{NumNodes: ptr.To[int32](2), MLPolicySource: trainer.MLPolicySource{
				Torch: &trainer.TorchMLPolicySource{NumProcPerNode: ptr.To(intstr.FromString("auto"))}}}, limits("cpu", "3")),
			want: Runtime{NumNodes: 2, Device: "cpu", DeviceCount: "6", Image: "img", Entrypoint: "torchrun"},
		},
		{
			name: "mpi numProcPerNode",
			spec: runtimeSpec(&trainer.MLPolicy{NumNodes: ptr.To[int32](2), MLPolicySource: trainer.MLPolicySource{
				MPI: &trainer.MPIMLPolicySource{NumProcPerNode: ptr.To[int32](5)}}}, limits("cpu", "1")),
			want: Runtime{NumNodes: 2, Device: "cpu", DeviceCount: "10", Image: "img", Entrypoint: "python3"},
		},
		{
			name: "a fractional count is not multiplied",
			spec: runtimeSpec(&trainer.MLPolicy{NumNodes: ptr.To[int32](2)}, limits("cpu", "500m")),
			want: Runtime{NumNodes: 2, Device: "cpu", DeviceCount: "500m", Image: "img", Entrypoint: "python3"},
		},
		{
			name: "no trainer job",
			spec: trainer.TrainingRuntimeSpec{MLPolicy: &trainer.MLPolicy{NumNodes: ptr.To[int32](4)}},
			want: Runtime{NumNodes: 4, Device: Unknown, DeviceCount: Unknown, Entrypoint: "python3"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := NewRuntime(trainer.ClusterTrainingRuntimeKind, "", "rt", map[string]string{trainer.FrameworkLabel: "torch"}, tc.spec)
			tc.want.Name, tc.want.Kind, tc.want.Framework = "rt", trainer.ClusterTrainingRuntimeKind, "torch"
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("NewRuntime (-want +got):\n%s", diff)
			}
		})
	}
}

// The runtimes Trainyard ships, as `trainyard runtimes` shows them.
func TestShippedRuntimes(t *testing.T) {
	want := map[string]Runtime{
		"torch-distributed": {Framework: "torch", NumNodes: 1, Device: Unknown, DeviceCount: Unknown,
			Image: "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime", Entrypoint: "torchrun"},
		"torch-distributed-gpu": {Framework: "torch", NumNodes: 1, Device: "gpu", DeviceCount: "1",
			Image: "nvcr.io/nvidia/pytorch:25.04-py3", Entrypoint: "torchrun"},
		"torch-distributed-with-dataset": {Framework: "torch", NumNodes: 1, Device: Unknown, DeviceCount: Unknown,
			Image: "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime", Entrypoint: "torchrun"},
		"plain-ml": {Framework: "plainml", NumNodes: 1, Device: Unknown, DeviceCount: Unknown,
			Image: "python:3.12-slim", Entrypoint: "python3"},
		"jax-distributed": {Framework: "jax", NumNodes: 1, Device: Unknown, DeviceCount: Unknown,
			Image: "nvcr.io/nvidia/jax:25.10-py3", Entrypoint: "python3"},
		"xgboost-distributed": {Framework: "xgboost", NumNodes: 1, Device: Unknown, DeviceCount: Unknown,
			Image: "ghcr.io/kubeflow/trainer/xgboost-runtime:v2.4.0", Entrypoint: "python3"},
		// Flux tasks per node are its process count.
		"flux-distributed": {Framework: "flux", NumNodes: 1, Device: Unknown, DeviceCount: "1",
			Image: "ubuntu:jammy", Entrypoint: "python3"},
		"torchtune-llama3.2-1b": {Framework: "torchtune", NumNodes: 1, Device: "gpu", DeviceCount: "2",
			Image: "ghcr.io/kubeflow/trainer/torchtune-trainer:v2.4.0", Entrypoint: "torchrun"},
		"torchtune-llama3.2-3b": {Framework: "torchtune", NumNodes: 1, Device: "gpu", DeviceCount: "2",
			Image: "ghcr.io/kubeflow/trainer/torchtune-trainer:v2.4.0", Entrypoint: "torchrun"},
		"torchtune-qwen2.5-1.5b": {Framework: "torchtune", NumNodes: 1, Device: "gpu", DeviceCount: "2",
			Image: "ghcr.io/kubeflow/trainer/torchtune-trainer:v2.4.0", Entrypoint: "torchrun"},
		// MPI runtimes: the launcher's image; the slots per node are the count.
		"mpi-distributed": {Framework: "mpi", NumNodes: 1, Device: Unknown, DeviceCount: "1",
			Image: "mpioperator/openmpi:v0.6.0", Entrypoint: "python3"},
		"deepspeed-distributed": {Framework: "deepspeed", NumNodes: 1, Device: Unknown, DeviceCount: "1",
			Image: "ghcr.io/kubeflow/trainer/deepspeed-runtime:v2.4.0", Entrypoint: "python3"},
		"mlx-distributed": {Framework: "mlx", NumNodes: 1, Device: Unknown, DeviceCount: "1",
			Image: "ghcr.io/kubeflow/trainer/mlx-runtime:v2.4.0", Entrypoint: "python3"},
	}
	files, err := filepath.Glob("../../runtimes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no runtimes found: %v", err)
	}
	got := map[string]Runtime{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var rt trainer.ClusterTrainingRuntime
		if err := yaml.UnmarshalStrict(data, &rt); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		r := NewRuntime(trainer.ClusterTrainingRuntimeKind, "", rt.Name, rt.Labels, rt.Spec)
		r.Name, r.Kind = "", ""
		got[rt.Name] = r
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("shipped runtimes (-want +got):\n%s", diff)
	}
}
