package runtime

import (
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// Info is the working state of one pipeline run: a private copy of the runtime's
// JobSet template with the TrainJob's overrides applied, plus the values plugins
// decide (the trainer node count). Plugins change the Info, never the TrainJob.
type Info struct {
	// Runtime is the resolved runtime; read-only.
	Runtime *Runtime

	// Labels and Annotations become the JobSet's metadata.
	Labels      map[string]string
	Annotations map[string]string

	// Spec is the JobSet spec under construction.
	Spec jobsetv1alpha2.JobSetSpec

	// TrainerJob is the name of the replicated job labelled as the trainer
	// ancestor ("" when the runtime has none).
	TrainerJob string

	// NumNodes is the number of training nodes (pods of the trainer job).
	NumNodes int32

	// QueueName is set when a queue (Kueue) manages the JobSet: it is created
	// suspended, and the queue starts it. The gang plugin (Kueue) writes it,
	// the JobSet plugin reads it; plugins share values only through Info.
	QueueName string
}

// MLPolicy returns the runtime's ML policy (nil when it has none).
func (i *Info) MLPolicy() *trainer.MLPolicy { return i.Runtime.Spec.MLPolicy }

// ReplicatedJob returns the replicated job with this name, or nil.
func (i *Info) ReplicatedJob(name string) *jobsetv1alpha2.ReplicatedJob {
	for k := range i.Spec.ReplicatedJobs {
		if i.Spec.ReplicatedJobs[k].Name == name {
			return &i.Spec.ReplicatedJobs[k]
		}
	}
	return nil
}

// PodSpec returns the pod spec of a replicated job, or nil.
func (i *Info) PodSpec(rjob string) *corev1.PodSpec {
	if rj := i.ReplicatedJob(rjob); rj != nil {
		return &rj.Template.Spec.Template.Spec
	}
	return nil
}

// Container returns a container (not an init container) of a replicated job, or nil.
func (i *Info) Container(rjob, name string) *corev1.Container {
	ps := i.PodSpec(rjob)
	if ps == nil {
		return nil
	}
	for k := range ps.Containers {
		if ps.Containers[k].Name == name {
			return &ps.Containers[k]
		}
	}
	return nil
}

// TrainerContainer returns the "node" container of the trainer job, or nil.
func (i *Info) TrainerContainer() *corev1.Container { return TrainerContainer(&i.Spec) }

// AncestorJob returns the name of the replicated job labelled with this ancestor step.
func AncestorJob(spec *jobsetv1alpha2.JobSetSpec, ancestor string) string {
	if rj := ancestorJob(spec, ancestor); rj != nil {
		return rj.Name
	}
	return ""
}

func ancestorJob(spec *jobsetv1alpha2.JobSetSpec, ancestor string) *jobsetv1alpha2.ReplicatedJob {
	for k := range spec.ReplicatedJobs {
		if spec.ReplicatedJobs[k].Template.Labels[trainer.AncestorLabel] == ancestor {
			return &spec.ReplicatedJobs[k]
		}
	}
	return nil
}

// TrainerJob returns the replicated job labelled as the trainer step of a
// JobSet spec (a runtime's template, or a rendered JobSet), or nil. It is the
// one place that finds the trainer.
func TrainerJob(spec *jobsetv1alpha2.JobSetSpec) *jobsetv1alpha2.ReplicatedJob {
	return ancestorJob(spec, trainer.AncestorTrainer)
}

// TrainerContainer returns the "node" container of a JobSet spec's trainer
// job, or nil.
func TrainerContainer(spec *jobsetv1alpha2.JobSetSpec) *corev1.Container {
	rj := TrainerJob(spec)
	if rj == nil {
		return nil
	}
	cs := rj.Template.Spec.Template.Spec.Containers
	for k := range cs {
		if cs[k].Name == trainer.NodeContainer {
			return &cs[k]
		}
	}
	return nil
}

// NewInfo builds the working copy for a request from a runtime: the template
// is deep-copied, the request's overrides (for a TrainJob: v2.1
// labels/annotations and podTemplateOverrides, v2.3 runtimePatches,
// normalised into one list) are applied, then the trainer fields (the
// initializer plugin handles the initializers). Errors carry the path of the
// job's field that caused them.
func NewInfo(req *Request, rt *Runtime) (*Info, error) {
	tmpl := rt.Spec.Template.DeepCopy()
	info := &Info{
		Runtime:     rt,
		Labels:      maps.Clone(tmpl.Labels),
		Annotations: maps.Clone(tmpl.Annotations),
		Spec:        tmpl.Spec,
	}
	for _, p := range req.Patches {
		if err := info.ApplyPatch(p); err != nil {
			return nil, err
		}
	}
	info.TrainerJob = AncestorJob(&info.Spec, trainer.AncestorTrainer)

	info.NumNodes = 1
	if mp := rt.Spec.MLPolicy; mp != nil && mp.NumNodes != nil {
		info.NumNodes = *mp.NumNodes
	}
	if t := req.Trainer; t != nil {
		if t.NumNodes != nil {
			info.NumNodes = *t.NumNodes
		}
		if err := info.applyTrainer(req.Paths.Trainer, t); err != nil {
			return nil, err
		}
	}
	return info, nil
}

// applyTrainer puts spec.trainer's image, command, args and env on the trainer's
// node container. Resources and node counts are left to the plugins.
func (i *Info) applyTrainer(path *field.Path, t *trainer.Trainer) error {
	if t.Image == nil && t.Command == nil && t.Args == nil && len(t.Env) == 0 {
		return nil
	}
	c := i.TrainerContainer()
	if c == nil {
		return field.Invalid(path, "",
			fmt.Sprintf("runtime %s %q has no replicated job labelled %s=%s with a %q container",
				i.Runtime.Kind, i.Runtime.Name, trainer.AncestorLabel, trainer.AncestorTrainer, trainer.NodeContainer))
	}
	if t.Image != nil {
		c.Image = *t.Image
	}
	if t.Command != nil {
		c.Command = append([]string(nil), t.Command...)
	}
	if t.Args != nil {
		c.Args = append([]string(nil), t.Args...)
	}
	c.Env = UpsertEnv(c.Env, t.Env...)
	return nil
}

// UpsertEnv returns env with each of vars set: an existing variable of the same
// name is replaced in place, a new one is appended. The input slice is not modified.
func UpsertEnv(env []corev1.EnvVar, vars ...corev1.EnvVar) []corev1.EnvVar {
	out := append([]corev1.EnvVar(nil), env...)
	for _, v := range vars {
		found := false
		for k := range out {
			if out[k].Name == v.Name {
				out[k] = *v.DeepCopy()
				found = true
				break
			}
		}
		if !found {
			out = append(out, *v.DeepCopy())
		}
	}
	return out
}

// UpsertVolumes returns vols with each of add set by name: a volume of the same
// name is replaced in place, a new one is appended (Kubeflow Trainer's merge
// rule). The input slice is not modified.
func UpsertVolumes(vols []corev1.Volume, add ...corev1.Volume) []corev1.Volume {
	return upsert(vols, deepCopies(add), func(v corev1.Volume) string { return v.Name })
}

// UpsertMounts returns mounts with each of add set by mount path: a mount on the
// same path is replaced (a path holds one volume), a new one is appended
// (Kubeflow Trainer's merge rule). The input slice is not modified.
func UpsertMounts(mounts []corev1.VolumeMount, add ...corev1.VolumeMount) []corev1.VolumeMount {
	return upsert(mounts, add, func(m corev1.VolumeMount) string { return m.MountPath })
}

func deepCopies(vols []corev1.Volume) []corev1.Volume {
	out := make([]corev1.Volume, len(vols))
	for k := range vols {
		vols[k].DeepCopyInto(&out[k])
	}
	return out
}

// UpsertPort adds a container port unless one with the same number exists.
func UpsertPort(c *corev1.Container, port corev1.ContainerPort) {
	for _, p := range c.Ports {
		if p.ContainerPort == port.ContainerPort {
			return
		}
	}
	c.Ports = append(c.Ports, port)
}
