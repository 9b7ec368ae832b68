package rtt

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
)

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

// PriorityClasses sets the priority class of each replicated job named.
func (w *RuntimeWrapper) PriorityClasses(byJob map[string]string) *RuntimeWrapper {
	for rjob, pc := range byJob {
		w.PodSpec(rjob, func(ps *corev1.PodSpec) { ps.PriorityClassName = pc })
	}
	return w
}

// Volcano puts the runtime under Volcano's gang scheduling with policy; nil
// leaves it without a podGroupPolicy.
func (w *RuntimeWrapper) Volcano(policy *trainer.VolcanoPodGroupPolicySource) *RuntimeWrapper {
	if policy != nil {
		w.Spec.PodGroupPolicy = &trainer.PodGroupPolicy{PodGroupPolicySource: trainer.PodGroupPolicySource{Volcano: policy}}
	}
	return w
}

// ---------------------------------------------------------------------------
// Small pieces
