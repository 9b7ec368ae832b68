package pytorchjob

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
)

// DefaultNprocPerNode is spec.nprocPerNode when neither it nor the deprecated
// elasticPolicy.nProcPerNode is set.
const DefaultNprocPerNode = "auto"

// Defaulted returns a copy of job with training-operator v1.9's defaults
// applied, as its controller applied them in memory on every pass. Trainyard's
// controller does the same, so that a job stored without defaults (webhooks
// off, or created before them) runs as v1 ran it.
//
// The defaults: cleanPodPolicy None; replica type keys in any case become
// Master and Worker; each replica gets replicas 1 and restartPolicy OnFailure,
// and its "pytorch" container (else its first) a port pytorchjob-port 23456
// unless it has one by that name; elastic bounds default to each other or to
// the worker count; nprocPerNode "auto" unless the deprecated
// elasticPolicy.nProcPerNode is set.
func Defaulted(job *kubeflowv1.PyTorchJob) *kubeflowv1.PyTorchJob {
	out := job.DeepCopy()
	spec := &out.Spec
	normalizeKeys(spec.PyTorchReplicaSpecs)
	Default(out)
	if ep := spec.ElasticPolicy; ep != nil && ep.MinReplicas == nil && ep.MaxReplicas == nil {
		// v1 dereferences the Worker spec here; validation requires it for
		// elastic jobs, but an unvalidated job must not crash the controller.
		if w := spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeWorker]; w != nil && w.Replicas != nil {
			ep.MinReplicas, ep.MaxReplicas = ptr.To(*w.Replicas), ptr.To(*w.Replicas)
		}
	}
	return out
}

// Default applies, in place, the defaults of Defaulted that may be stored
// (the admission webhook's), with the same rules. It leaves out two that must
// stay in memory:
//   - renaming replica type keys: a later apply of the user's "master" key
//     would then add a second, partial replica spec beside the stored
//     "Master" instead of changing it;
//   - elastic bounds taken from the worker count when neither is set: stored,
//     they would stay at the count of creation when the scale subresource
//     (kubectl scale, the HPA) changes Worker.replicas, where v1 follows it.
func Default(job *kubeflowv1.PyTorchJob) {
	spec := &job.Spec
	if spec.RunPolicy.CleanPodPolicy == nil {
		spec.RunPolicy.CleanPodPolicy = ptr.To(kubeflowv1.CleanPodPolicyNone)
	}
	for _, rs := range spec.PyTorchReplicaSpecs {
		if rs == nil {
			continue
		}
		if rs.Replicas == nil {
			rs.Replicas = ptr.To[int32](1)
		}
		if rs.RestartPolicy == "" {
			rs.RestartPolicy = kubeflowv1.PyTorchJobDefaultRestartPolicy
		}
		defaultPort(&rs.Template.Spec)
	}
	if ep := spec.ElasticPolicy; ep != nil {
		switch {
		case ep.MaxReplicas != nil && ep.MinReplicas == nil:
			ep.MinReplicas = ptr.To(*ep.MaxReplicas)
		case ep.MinReplicas != nil && ep.MaxReplicas == nil:
			ep.MaxReplicas = ptr.To(*ep.MinReplicas)
		}
	}
	if spec.NprocPerNode == nil && (spec.ElasticPolicy == nil || spec.ElasticPolicy.NProcPerNode == nil) {
		spec.NprocPerNode = ptr.To(DefaultNprocPerNode)
	}
}

// canonicalType returns Master or Worker for a key in any case, "" otherwise.
func canonicalType(key kubeflowv1.ReplicaType) kubeflowv1.ReplicaType {
	t, _ := ReplicaTypeOf(string(key))
	return t
}

// normalizeKeys renames replica type keys written in another case ("master",
// "WORKER") to Master and Worker. A key already in the right case wins over a
// differently cased duplicate (validation reports the duplicate).
func normalizeKeys(specs map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec) {
	for key, rs := range specs {
		c := canonicalType(key)
		if c == "" || c == key {
			continue
		}
		delete(specs, key)
		if _, ok := specs[c]; !ok {
			specs[c] = rs
		}
	}
}

// defaultPort adds pytorchjob-port to the "pytorch" container (or the first
// container) unless it has a port with that name.
func defaultPort(pod *corev1.PodSpec) {
	if len(pod.Containers) == 0 {
		return
	}
	idx := 0
	for i, c := range pod.Containers {
		if c.Name == kubeflowv1.PyTorchJobDefaultContainerName {
			idx = i
			break
		}
	}
	c := &pod.Containers[idx]
	for _, p := range c.Ports {
		if p.Name == kubeflowv1.PyTorchJobDefaultPortName {
			return
		}
	}
	c.Ports = append(c.Ports, corev1.ContainerPort{Name: kubeflowv1.PyTorchJobDefaultPortName, ContainerPort: kubeflowv1.PyTorchJobDefaultPort})
}
