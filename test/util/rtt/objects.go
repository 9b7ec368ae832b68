package rtt

import (
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
)

// ---------------------------------------------------------------------------
// Building blocks and the shipped runtimes

// MakeReplicatedJob returns a replicated job whose Job template carries the
// ancestor label (none when ancestor is "") and the given containers.
func MakeReplicatedJob(name, ancestor string, containers ...corev1.Container) jobsetv1alpha2.ReplicatedJob {
	rj := jobsetv1alpha2.ReplicatedJob{
		Name: name,
		Template: batchv1.JobTemplateSpec{
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{}}},
		},
	}
	if ancestor != "" {
		rj.Template.Labels = map[string]string{trainer.AncestorLabel: ancestor}
	}
	for _, c := range containers {
		rj.Template.Spec.Template.Spec.Containers = append(rj.Template.Spec.Template.Spec.Containers, *c.DeepCopy())
	}
	return rj
}

// MakeContainer returns a container with a name and an image.
func MakeContainer(name, image string) corev1.Container {
	return corev1.Container{Name: name, Image: image}
}

// Env is a plain name=value variable.
func Env(name, value string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: value} }

// ResourceList parses name/quantity pairs: ResourceList("cpu", "2", "nvidia.com/gpu", "4").
func ResourceList(pairs ...string) corev1.ResourceList {
	if len(pairs)%2 != 0 {
		panic("ResourceList needs name/quantity pairs")
	}
	out := corev1.ResourceList{}
	for k := 0; k < len(pairs); k += 2 {
		out[corev1.ResourceName(pairs[k])] = resource.MustParse(pairs[k+1])
	}
	return out
}

// Requests returns requirements with only requests.
func Requests(pairs ...string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: ResourceList(pairs...)}
}

// Limits returns requirements with only limits.
func Limits(pairs ...string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Limits: ResourceList(pairs...)}
}

// ---------------------------------------------------------------------------
// Shipped runtimes

// RepoRoot is the root of the trainyard module (found from this file's path).
func RepoRoot() string {
	_, file, _, ok := goruntime.Caller(0)
	if !ok {
		panic("cannot locate test/util/rtt")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// LoadRuntimeFile reads a TrainingRuntime or ClusterTrainingRuntime YAML
// document (unknown fields are an error) and resolves it as the controller does.
func LoadRuntimeFile(path string) (*runtime.Runtime, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(b, &tm); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	switch tm.Kind {
	case trainer.ClusterTrainingRuntimeKind:
		var rt trainer.ClusterTrainingRuntime
		if err := yaml.UnmarshalStrict(b, &rt); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return runtime.FromClusterTrainingRuntime(&rt), nil
	case trainer.TrainingRuntimeKind:
		var rt trainer.TrainingRuntime
		if err := yaml.UnmarshalStrict(b, &rt); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return runtime.FromTrainingRuntime(&rt), nil
	}
	return nil, fmt.Errorf("%s: kind %q is not a runtime", path, tm.Kind)
}

// LoadTrainJobFile reads a TrainJob YAML document (unknown fields are an error).
func LoadTrainJobFile(path string) (*trainer.TrainJob, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var job trainer.TrainJob
	if err := yaml.UnmarshalStrict(b, &job); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &job, nil
}

// TorchDistributedRuntime loads runtimes/torch-distributed.yaml.
func TorchDistributedRuntime() (*runtime.Runtime, error) {
	return LoadRuntimeFile(filepath.Join(RepoRoot(), "runtimes", "torch-distributed.yaml"))
}

// MustTorchDistributedRuntime is TorchDistributedRuntime for test set-up; it panics on error.
func MustTorchDistributedRuntime() *runtime.Runtime {
	rt, err := TorchDistributedRuntime()
	if err != nil {
		panic(err)
	}
	return rt
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
