package runtime

import (
	"encoding/json"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"

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

// ApplyPatch applies one patch to the Info with strategic-merge semantics, the
// semantics both public override forms have: maps merge, lists with a merge key
// (containers, env, volumes, volumeMounts, schedulingGates, imagePullSecrets)
// merge by that key, other values replace. A patch naming a replicated job or
// container the runtime does not have is an error.
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

func mergePodTemplate(orig *corev1.PodTemplateSpec, pt *trainer.PodTemplatePatch) (*corev1.PodTemplateSpec, error) {
	origJSON, err := json.Marshal(orig)
	if err != nil {
		return nil, fmt.Errorf("encoding pod template: %w", err)
	}
	patch := map[string]any{}
	if pt.Metadata != nil {
		md := map[string]any{}
		if len(pt.Metadata.Labels) > 0 {
			md["labels"] = pt.Metadata.Labels
		}
		if len(pt.Metadata.Annotations) > 0 {
			md["annotations"] = pt.Metadata.Annotations
		}
		patch["metadata"] = md
	}
	if pt.Spec != nil {
		patch["spec"] = pt.Spec
	}
	patchJSON, err := json.Marshal(patch)
	if err != nil {
		return nil, fmt.Errorf("encoding pod template patch: %w", err)
	}
	mergedJSON, err := strategicpatch.StrategicMergePatch(origJSON, patchJSON, corev1.PodTemplateSpec{})
	if err != nil {
		return nil, fmt.Errorf("applying pod template patch: %w", err)
	}
	var merged corev1.PodTemplateSpec
	if err := json.Unmarshal(mergedJSON, &merged); err != nil {
		return nil, fmt.Errorf("decoding patched pod template: %w", err)
	}
	return &merged, nil
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
