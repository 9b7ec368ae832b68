// Package rtt holds small builders for the tests of pkg/runtime and its
// plugins: MakeTrainJob(ns, name)...Obj() and MakeRuntime(kind, name)...Obj(),
// plus a loader for the runtimes shipped in runtimes/.
//
// Every builder returns a fresh object on each call and never shares maps or
// slices with the arguments it was given, so tests can mutate the results freely.
package rtt

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
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
