package runtime

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// Patch is one change to the runtime template, in the v2.3 RuntimePatch shape,
// with the path of the TrainJob field it came from (for error messages).
type Patch struct {
	Path  *field.Path
	Patch trainer.RuntimePatch
}

// LegacyManager is the manager name given to patches normalised from the v2.1
// fields (spec.labels, spec.annotations, spec.podTemplateOverrides).
const LegacyManager = "trainer.kubeflow.org/v2.1-overrides"

// NormalizePatches turns every override form a TrainJob can carry into one
// ordered list of patches: first the v2.1 spec.labels/spec.annotations, then each
// v2.1 podTemplateOverride, then the v2.3 runtimePatches in list order. Later
// patches win where they touch the same value.
func NormalizePatches(job *trainer.TrainJob) []Patch {
	var out []Patch
	spec := field.NewPath("spec")
	if len(job.Spec.Labels) > 0 || len(job.Spec.Annotations) > 0 {
		out = append(out, Patch{Path: spec, Patch: trainer.RuntimePatch{
			Manager: LegacyManager,
			TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{
				Metadata: metaPatch{Labels: job.Spec.Labels, Annotations: job.Spec.Annotations}.objectMeta(),
			}},
		}})
	}
	for k, o := range job.Spec.PodTemplateOverrides {
		pt := &trainer.PodTemplatePatch{}
		if o.Metadata != nil {
			pt.Metadata = metaPatch{Labels: o.Metadata.Labels, Annotations: o.Metadata.Annotations}.objectMeta()
		}
		if s := o.Spec; s != nil {
			pt.Spec = &trainer.PodSpecPatch{
				ServiceAccountName: s.ServiceAccountName,
				NodeSelector:       s.NodeSelector,
				Affinity:           s.Affinity,
				Tolerations:        s.Tolerations,
				Volumes:            s.Volumes,
				InitContainers:     containerPatches(s.InitContainers),
				Containers:         containerPatches(s.Containers),
				SchedulingGates:    s.SchedulingGates,
				ImagePullSecrets:   s.ImagePullSecrets,
			}
		}
		var rjobs []trainer.ReplicatedJobPatch
		for _, t := range o.TargetJobs {
			rjobs = append(rjobs, trainer.ReplicatedJobPatch{Name: t.Name, Template: &trainer.JobTemplatePatch{
				Spec: &trainer.JobSpecPatch{Template: pt},
			}})
		}
		out = append(out, Patch{Path: spec.Child("podTemplateOverrides").Index(k), Patch: trainer.RuntimePatch{
			Manager: LegacyManager,
			TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{
				Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: rjobs},
			}},
		}})
	}
	for k, p := range job.Spec.RuntimePatches {
		out = append(out, Patch{Path: spec.Child("runtimePatches").Index(k), Patch: p})
	}
	return out
}

type metaPatch struct{ Labels, Annotations map[string]string }

func (m metaPatch) objectMeta() *metav1.ObjectMeta {
	return &metav1.ObjectMeta{Labels: m.Labels, Annotations: m.Annotations}
}

func containerPatches(in []trainer.ContainerOverride) []trainer.ContainerPatch {
	var out []trainer.ContainerPatch
	for _, c := range in {
		out = append(out, trainer.ContainerPatch{Name: c.Name, Env: c.Env, VolumeMounts: c.VolumeMounts})
	}
	return out
}

// ApplyPatch applies one patch to the Info (see mergePodTemplate for the merge
// rules). A patch naming a replicated job or container the runtime does not have
// is an error.
func (i *Info) ApplyPatch(p Patch) error {
	spec := p.Patch.TrainingRuntimeSpec
	if spec == nil || spec.Template == nil {
		return nil
	}
	tmplPath := p.Path
	if p.Patch.Manager != LegacyManager {
		tmplPath = p.Path.Child("trainingRuntimeSpec", "template")
	}
	if md := spec.Template.Metadata; md != nil {
		i.Labels = mergeMaps(i.Labels, md.Labels)
		i.Annotations = mergeMaps(i.Annotations, md.Annotations)
	}
	if spec.Template.Spec == nil {
		return nil
	}
	for k, rp := range spec.Template.Spec.ReplicatedJobs {
		path := tmplPath.Child("spec", "replicatedJobs").Index(k)
		if p.Patch.Manager == LegacyManager {
			path = p.Path.Child("targetJobs").Index(k)
		}
		rj := i.ReplicatedJob(rp.Name)
		if rj == nil {
			return field.NotFound(path.Child("name"), rp.Name)
		}
		if rp.Template == nil {
			continue
		}
		if md := rp.Template.Metadata; md != nil {
			rj.Template.Labels = mergeMaps(rj.Template.Labels, md.Labels)
			rj.Template.Annotations = mergeMaps(rj.Template.Annotations, md.Annotations)
		}
		if rp.Template.Spec == nil || rp.Template.Spec.Template == nil {
			continue
		}
		pt := rp.Template.Spec.Template
		if pt.Spec != nil {
			if err := checkContainers(&rj.Template.Spec.Template.Spec, pt.Spec, path, p.Patch.Manager == LegacyManager, p.Path); err != nil {
				return err
			}
		}
		merged, err := mergePodTemplate(&rj.Template.Spec.Template, pt)
		if err != nil {
			return field.Invalid(path, rp.Name, err.Error())
		}
		rj.Template.Spec.Template = *merged
	}
	return nil
}

// checkContainers rejects container patches for containers the pod does not
// have: a strategic merge would silently add a container with no image.
func checkContainers(pod *corev1.PodSpec, ps *trainer.PodSpecPatch, path *field.Path, legacy bool, legacyPath *field.Path) error {
	has := func(list []corev1.Container, name string) bool {
		for _, c := range list {
			if c.Name == name {
				return true
			}
		}
		return false
	}
	base := path.Child("template", "spec", "template", "spec")
	if legacy {
		base = legacyPath.Child("spec")
	}
	for k, c := range ps.Containers {
		if !has(pod.Containers, c.Name) {
			return field.NotFound(base.Child("containers").Index(k).Child("name"), c.Name)
		}
	}
	for k, c := range ps.InitContainers {
		if !has(pod.InitContainers, c.Name) {
			return field.NotFound(base.Child("initContainers").Index(k).Child("name"), c.Name)
		}
	}
	return nil
}

// mergePodTemplate applies a pod template patch. Maps merge key by key. Lists
// keyed by name (env, volumes, containers, schedulingGates, imagePullSecrets) or
// mount path (volumeMounts) keep the runtime's order: an entry with the same key
// is replaced whole, a new one is appended in the patch's order. Replacing whole
// entries (unlike a strategic merge, which merges their fields) never produces
// an entry with two sources, such as an env var with both value and valueFrom.
// Tolerations are a union: a queue adds the tolerations of the flavor it
// assigned, and the runtime's own must stay. Scalars and structs replace.
func mergePodTemplate(orig *corev1.PodTemplateSpec, pt *trainer.PodTemplatePatch) (*corev1.PodTemplateSpec, error) {
	out := orig.DeepCopy()
	if md := pt.Metadata; md != nil {
		out.Labels = mergeMaps(out.Labels, md.Labels)
		out.Annotations = mergeMaps(out.Annotations, md.Annotations)
	}
	ps := pt.Spec
	if ps == nil {
		return out, nil
	}
	pod := &out.Spec
	if ps.ServiceAccountName != nil {
		pod.ServiceAccountName = *ps.ServiceAccountName
	}
	pod.Volumes = upsert(pod.Volumes, ps.Volumes, func(v corev1.Volume) string { return v.Name })
	pod.ImagePullSecrets = upsert(pod.ImagePullSecrets, ps.ImagePullSecrets, func(v corev1.LocalObjectReference) string { return v.Name })
	pod.SchedulingGates = upsert(pod.SchedulingGates, ps.SchedulingGates, func(v corev1.PodSchedulingGate) string { return v.Name })
	if ps.SecurityContext != nil {
		pod.SecurityContext = ps.SecurityContext.DeepCopy()
	}
	pod.NodeSelector = mergeMaps(pod.NodeSelector, ps.NodeSelector)
	if ps.Affinity != nil {
		pod.Affinity = ps.Affinity.DeepCopy()
	}
	for _, t := range ps.Tolerations {
		if !slices.ContainsFunc(pod.Tolerations, func(have corev1.Toleration) bool {
			return have.MatchToleration(&t) && equality.Semantic.DeepEqual(have, t)
		}) {
			pod.Tolerations = append(pod.Tolerations, *t.DeepCopy())
		}
	}
	if ps.TerminationGracePeriodSeconds != nil {
		pod.TerminationGracePeriodSeconds = ptr.To(*ps.TerminationGracePeriodSeconds)
	}
	patchContainers(pod.Containers, ps.Containers)
	patchContainers(pod.InitContainers, ps.InitContainers)
	return out, nil
}

// patchContainers changes existing containers in place (checkContainers has
// rejected patches for containers that do not exist).
func patchContainers(containers []corev1.Container, patches []trainer.ContainerPatch) {
	for _, cp := range patches {
		for i := range containers {
			c := &containers[i]
			if c.Name != cp.Name {
				continue
			}
			c.Env = UpsertEnv(c.Env, cp.Env...)
			c.VolumeMounts = upsert(c.VolumeMounts, cp.VolumeMounts, func(m corev1.VolumeMount) string { return m.MountPath })
			if cp.SecurityContext != nil {
				c.SecurityContext = cp.SecurityContext.DeepCopy()
			}
		}
	}
}

// upsert returns list with each item of add: replacing the entry with the same
// key in place, or appended. Neither input is modified.
func upsert[T any](list, add []T, key func(T) string) []T {
	if len(add) == 0 {
		return list
	}
	out := append([]T(nil), list...)
	for _, a := range add {
		i := slices.IndexFunc(out, func(have T) bool { return key(have) == key(a) })
		if i >= 0 {
			out[i] = a
		} else {
			out = append(out, a)
		}
	}
	return out
}

func mergeMaps(dst, src map[string]string) map[string]string {
	if len(src) == 0 {
		return dst
	}
	out := maps.Clone(dst)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, src)
	return out
}
