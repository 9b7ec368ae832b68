// Package testing holds small builders for the tests of pkg/runtime and its
// plugins: MakeTrainJob(ns, name)...Obj() and MakeRuntime(kind, name)...Obj(),
// plus a loader for the runtimes shipped in runtimes/.
//
// Every builder returns a fresh object on each call and never shares maps or
// slices with the arguments it was given, so tests can mutate the results freely.
package testing

import (
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
)

// TorchDistributed is the name of the runtime in runtimes/torch-distributed.yaml.
const TorchDistributed = "torch-distributed"

// ---------------------------------------------------------------------------
// TrainJob

// TrainJobWrapper builds a TrainJob.
type TrainJobWrapper struct{ trainer.TrainJob }

// MakeTrainJob returns a TrainJob referring to the torch-distributed
// ClusterTrainingRuntime (with the reference defaults left unset, as a user
// would write it).
func MakeTrainJob(ns, name string) *TrainJobWrapper {
	return &TrainJobWrapper{trainer.TrainJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: TorchDistributed}},
	}}
}

// Obj returns a deep copy of the TrainJob built so far.
func (w *TrainJobWrapper) Obj() *trainer.TrainJob { return w.DeepCopy() }

// RuntimeRef sets spec.runtimeRef (kind "" leaves the kind unset).
func (w *TrainJobWrapper) RuntimeRef(kind, name string) *TrainJobWrapper {
	w.Spec.RuntimeRef = trainer.RuntimeRef{Name: name}
	if kind != "" {
		w.Spec.RuntimeRef.Kind = ptr.To(kind)
	}
	return w
}

// Suspend sets spec.suspend.
func (w *TrainJobWrapper) Suspend(s bool) *TrainJobWrapper {
	w.Spec.Suspend = ptr.To(s)
	return w
}

func (w *TrainJobWrapper) trainer() *trainer.Trainer {
	if w.Spec.Trainer == nil {
		w.Spec.Trainer = &trainer.Trainer{}
	}
	return w.Spec.Trainer
}

// Trainer sets an empty spec.trainer (so that it is non-nil).
func (w *TrainJobWrapper) Trainer() *TrainJobWrapper {
	w.trainer()
	return w
}

// NumNodes sets spec.trainer.numNodes.
func (w *TrainJobWrapper) NumNodes(n int32) *TrainJobWrapper {
	w.trainer().NumNodes = ptr.To(n)
	return w
}

// Image sets spec.trainer.image.
func (w *TrainJobWrapper) Image(image string) *TrainJobWrapper {
	w.trainer().Image = ptr.To(image)
	return w
}

// Command sets spec.trainer.command.
func (w *TrainJobWrapper) Command(cmd ...string) *TrainJobWrapper {
	w.trainer().Command = append([]string{}, cmd...)
	return w
}

// Args sets spec.trainer.args.
func (w *TrainJobWrapper) Args(args ...string) *TrainJobWrapper {
	w.trainer().Args = append([]string{}, args...)
	return w
}

// Env appends to spec.trainer.env.
func (w *TrainJobWrapper) Env(env ...corev1.EnvVar) *TrainJobWrapper {
	t := w.trainer()
	for _, e := range env {
		t.Env = append(t.Env, *e.DeepCopy())
	}
	return w
}

// NumProcPerNode sets spec.trainer.numProcPerNode.
func (w *TrainJobWrapper) NumProcPerNode(v intstr.IntOrString) *TrainJobWrapper {
	w.trainer().NumProcPerNode = ptr.To(v)
	return w
}

// ResourcesPerNode sets spec.trainer.resourcesPerNode.
func (w *TrainJobWrapper) ResourcesPerNode(res corev1.ResourceRequirements) *TrainJobWrapper {
	w.trainer().ResourcesPerNode = res.DeepCopy()
	return w
}

// Labels sets spec.labels (v2.1).
func (w *TrainJobWrapper) Labels(l map[string]string) *TrainJobWrapper {
	w.Spec.Labels = cloneMap(l)
	return w
}

// Annotations sets spec.annotations (v2.1).
func (w *TrainJobWrapper) Annotations(a map[string]string) *TrainJobWrapper {
	w.Spec.Annotations = cloneMap(a)
	return w
}

// PodTemplateOverride appends a v2.1 podTemplateOverride.
func (w *TrainJobWrapper) PodTemplateOverride(o trainer.PodTemplateOverride) *TrainJobWrapper {
	w.Spec.PodTemplateOverrides = append(w.Spec.PodTemplateOverrides, *o.DeepCopy())
	return w
}

// RuntimePatch appends a v2.3 runtimePatch.
func (w *TrainJobWrapper) RuntimePatch(p trainer.RuntimePatch) *TrainJobWrapper {
	w.Spec.RuntimePatches = append(w.Spec.RuntimePatches, *p.DeepCopy())
	return w
}

// DatasetInitializer sets spec.initializer.dataset.
func (w *TrainJobWrapper) DatasetInitializer(uri string, secret string, env ...corev1.EnvVar) *TrainJobWrapper {
	if w.Spec.Initializer == nil {
		w.Spec.Initializer = &trainer.Initializer{}
	}
	d := &trainer.DatasetInitializer{StorageUri: ptr.To(uri)}
	for _, e := range env {
		d.Env = append(d.Env, *e.DeepCopy())
	}
	if secret != "" {
		d.SecretRef = &corev1.LocalObjectReference{Name: secret}
	}
	w.Spec.Initializer.Dataset = d
	return w
}

// ModelInitializer sets spec.initializer.model.
func (w *TrainJobWrapper) ModelInitializer(uri string, secret string, env ...corev1.EnvVar) *TrainJobWrapper {
	if w.Spec.Initializer == nil {
		w.Spec.Initializer = &trainer.Initializer{}
	}
	m := &trainer.ModelInitializer{StorageUri: ptr.To(uri)}
	for _, e := range env {
		m.Env = append(m.Env, *e.DeepCopy())
	}
	if secret != "" {
		m.SecretRef = &corev1.LocalObjectReference{Name: secret}
	}
	w.Spec.Initializer.Model = m
	return w
}

// ---------------------------------------------------------------------------
// Runtime

// RuntimeWrapper builds a resolved runtime.
type RuntimeWrapper struct{ runtime.Runtime }

// MakeRuntime returns a runtime with no ML policy and one replicated job "node",
// labelled as the trainer, with one "node" container.
func MakeRuntime(kind, name string) *RuntimeWrapper {
	return &RuntimeWrapper{runtime.Runtime{
		Kind: kind,
		Name: name,
		Spec: trainer.TrainingRuntimeSpec{
			Template: trainer.JobSetTemplateSpec{Spec: jobsetv1alpha2.JobSetSpec{
				ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{
					MakeReplicatedJob("node", trainer.AncestorTrainer, MakeContainer(trainer.NodeContainer, "trainer:latest")),
				},
			}},
		},
	}}
}

// MakeTorchRuntime is the Go twin of runtimes/torch-distributed.yaml (under the
// given name): mlPolicy {numNodes: 1, torch: {}}, publishNotReadyAddresses, and
// one trainer job "node" with a pytorch "node" container.
func MakeTorchRuntime(name string) *RuntimeWrapper {
	w := MakeRuntime(trainer.ClusterTrainingRuntimeKind, name)
	w.Spec.MLPolicy = &trainer.MLPolicy{NumNodes: ptr.To[int32](1), MLPolicySource: trainer.MLPolicySource{Torch: &trainer.TorchMLPolicySource{}}}
	w.Spec.Template.Spec.Network = &jobsetv1alpha2.Network{PublishNotReadyAddresses: ptr.To(true)}
	w.Spec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].Image = "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime"
	return w
}

// Obj returns a deep copy of the runtime built so far.
func (w *RuntimeWrapper) Obj() *runtime.Runtime {
	out := w.Runtime
	out.Spec = *w.Spec.DeepCopy()
	return &out
}

// UID sets the uid and generation.
func (w *RuntimeWrapper) UID(uid string, gen int64) *RuntimeWrapper {
	w.Runtime.UID = types.UID(uid)
	w.Generation = gen
	return w
}

// MLPolicy replaces spec.mlPolicy.
func (w *RuntimeWrapper) MLPolicy(mp *trainer.MLPolicy) *RuntimeWrapper {
	w.Spec.MLPolicy = mp.DeepCopy()
	return w
}

func (w *RuntimeWrapper) mlPolicy() *trainer.MLPolicy {
	if w.Spec.MLPolicy == nil {
		w.Spec.MLPolicy = &trainer.MLPolicy{}
	}
	return w.Spec.MLPolicy
}

// NumNodes sets spec.mlPolicy.numNodes.
func (w *RuntimeWrapper) NumNodes(n int32) *RuntimeWrapper {
	w.mlPolicy().NumNodes = ptr.To(n)
	return w
}

// Torch sets spec.mlPolicy.torch.
func (w *RuntimeWrapper) Torch(t *trainer.TorchMLPolicySource) *RuntimeWrapper {
	w.mlPolicy().Torch = t.DeepCopy()
	return w
}

// TorchNumProcPerNode sets spec.mlPolicy.torch.numProcPerNode (creating torch).
func (w *RuntimeWrapper) TorchNumProcPerNode(v intstr.IntOrString) *RuntimeWrapper {
	mp := w.mlPolicy()
	if mp.Torch == nil {
		mp.Torch = &trainer.TorchMLPolicySource{}
	}
	mp.Torch.NumProcPerNode = ptr.To(v)
	return w
}

// Labels sets the JobSet template's labels.
func (w *RuntimeWrapper) Labels(l map[string]string) *RuntimeWrapper {
	w.Spec.Template.Labels = cloneMap(l)
	return w
}

// Annotations sets the JobSet template's annotations.
func (w *RuntimeWrapper) Annotations(a map[string]string) *RuntimeWrapper {
	w.Spec.Template.Annotations = cloneMap(a)
	return w
}

// Subdomain sets spec.template.spec.network.subdomain.
func (w *RuntimeWrapper) Subdomain(s string) *RuntimeWrapper {
	if w.Spec.Template.Spec.Network == nil {
		w.Spec.Template.Spec.Network = &jobsetv1alpha2.Network{}
	}
	w.Spec.Template.Spec.Network.Subdomain = s
	return w
}

// ReplicatedJobs replaces the replicated jobs.
func (w *RuntimeWrapper) ReplicatedJobs(rjs ...jobsetv1alpha2.ReplicatedJob) *RuntimeWrapper {
	w.Spec.Template.Spec.ReplicatedJobs = nil
	return w.ReplicatedJob(rjs...)
}

// ReplicatedJob appends replicated jobs.
func (w *RuntimeWrapper) ReplicatedJob(rjs ...jobsetv1alpha2.ReplicatedJob) *RuntimeWrapper {
	for _, rj := range rjs {
		w.Spec.Template.Spec.ReplicatedJobs = append(w.Spec.Template.Spec.ReplicatedJobs, *rj.DeepCopy())
	}
	return w
}

func (w *RuntimeWrapper) podSpec(rjob string) *corev1.PodSpec {
	for k := range w.Spec.Template.Spec.ReplicatedJobs {
		if rj := &w.Spec.Template.Spec.ReplicatedJobs[k]; rj.Name == rjob {
			return &rj.Template.Spec.Template.Spec
		}
	}
	panic(fmt.Sprintf("runtime %q has no replicated job %q", w.Name, rjob))
}

func (w *RuntimeWrapper) container(rjob, name string) *corev1.Container {
	ps := w.podSpec(rjob)
	for k := range ps.Containers {
		if ps.Containers[k].Name == name {
			return &ps.Containers[k]
		}
	}
	panic(fmt.Sprintf("runtime %q has no container %s/%s", w.Name, rjob, name))
}

// Container appends a container to a replicated job.
func (w *RuntimeWrapper) Container(rjob string, c corev1.Container) *RuntimeWrapper {
	ps := w.podSpec(rjob)
	ps.Containers = append(ps.Containers, *c.DeepCopy())
	return w
}

// ContainerEnv appends env to a container of a replicated job.
func (w *RuntimeWrapper) ContainerEnv(rjob, name string, env ...corev1.EnvVar) *RuntimeWrapper {
	c := w.container(rjob, name)
	for _, e := range env {
		c.Env = append(c.Env, *e.DeepCopy())
	}
	return w
}

// TrainerResources sets the resources of the "node" container of the "node" job.
func (w *RuntimeWrapper) TrainerResources(res corev1.ResourceRequirements) *RuntimeWrapper {
	w.container("node", trainer.NodeContainer).Resources = *res.DeepCopy()
	return w
}

// PodSpec lets a test change a replicated job's pod spec directly.
func (w *RuntimeWrapper) PodSpec(rjob string, f func(*corev1.PodSpec)) *RuntimeWrapper {
	f(w.podSpec(rjob))
	return w
}

// ---------------------------------------------------------------------------
// Small pieces

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
		panic("cannot locate pkg/runtime/testing")
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
