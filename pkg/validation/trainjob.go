// Package validation holds the checks of TrainJobs and runtimes that go beyond
// the CRD schema. The admission webhooks run them at the door; the controller
// runs them again, so that bad input is reported in status even when webhooks
// are not installed. Every error names the offending field.
package validation

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
)

// reservedContainers get their environment from TrainJob fields
// (spec.trainer.env, spec.initializer.*.env); an override must not set it.
var reservedContainers = map[string]string{
	trainer.NodeContainer:               "spec.trainer.env",
	trainer.DatasetInitializerContainer: "spec.initializer.dataset.env",
	trainer.ModelInitializerContainer:   "spec.initializer.model.env",
}

// ValidateTrainJob checks a TrainJob that needs no runtime to check: names,
// ranges, overrides touching reserved containers, and, on update, changes that
// are only allowed while the job is suspended. oldJob is nil on create.
func ValidateTrainJob(oldJob, job *trainer.TrainJob) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	name := job.Name
	if oldJob == nil {
		namePath := field.NewPath("metadata", "name")
		if len(name) > 0 && name[0] >= '0' && name[0] <= '9' {
			errs = append(errs, field.Invalid(namePath, name, "must start with a lowercase letter: it becomes part of pod host names (RFC 1035 label)"))
		} else if msgs := validation.IsDNS1035Label(name); len(msgs) > 0 {
			for _, m := range msgs {
				errs = append(errs, field.Invalid(namePath, name, m))
			}
		}
	}
	if t := job.Spec.Trainer; t != nil {
		tp := spec.Child("trainer")
		if t.NumNodes != nil {
			if err := runtime.CheckTrainerNumNodes(tp.Child("numNodes"), *t.NumNodes); err != nil {
				errs = append(errs, err)
			}
		}
		if v := t.NumProcPerNode; v != nil {
			if err := runtime.CheckNumProcPerNode(tp.Child("numProcPerNode"), *v); err != nil {
				errs = append(errs, err)
			}
		}
		// Requests above limits are checked by the resources plugin, after
		// merging with the runtime's container (the only place both are known).
	}
	if m := job.Spec.ManagedBy; m != nil && *m != trainer.TrainJobControllerName && *m != trainer.MultiKueueControllerName {
		errs = append(errs, field.NotSupported(spec.Child("managedBy"), *m, []string{trainer.TrainJobControllerName, trainer.MultiKueueControllerName}))
	}
	errs = append(errs, validateOverrideEnv(job)...)
	if oldJob != nil {
		errs = append(errs, validateUpdate(oldJob, job)...)
	}
	return errs
}

// validateOverrideEnv rejects env set through an override on containers whose
// environment comes from TrainJob fields.
func validateOverrideEnv(job *trainer.TrainJob) field.ErrorList {
	var errs field.ErrorList
	for _, p := range runtime.NormalizePatches(job) {
		ts := p.Patch.TrainingRuntimeSpec
		if ts == nil || ts.Template == nil || ts.Template.Spec == nil {
			continue
		}
		legacy := p.Patch.Manager == runtime.LegacyManager
		for k, rj := range ts.Template.Spec.ReplicatedJobs {
			if rj.Template == nil || rj.Template.Spec == nil || rj.Template.Spec.Template == nil || rj.Template.Spec.Template.Spec == nil {
				continue
			}
			base := p.Path.Child("trainingRuntimeSpec", "template", "spec", "replicatedJobs").Index(k).Child("template", "spec", "template", "spec")
			if legacy {
				base = p.Path.Child("spec")
			}
			for i, c := range rj.Template.Spec.Template.Spec.Containers {
				if use, ok := reservedContainers[c.Name]; ok && len(c.Env) > 0 {
					errs = append(errs, field.Forbidden(base.Child("containers").Index(i).Child("env"),
						fmt.Sprintf("must not set env on the %q container; use %s", c.Name, use)))
				}
			}
			for i, c := range rj.Template.Spec.Template.Spec.InitContainers {
				if use, ok := reservedContainers[c.Name]; ok && len(c.Env) > 0 {
					errs = append(errs, field.Forbidden(base.Child("initContainers").Index(i).Child("env"),
						fmt.Sprintf("must not set env on the %q container; use %s", c.Name, use)))
				}
			}
		}
	}
	return dedupe(errs)
}

// validateUpdate: overrides (what a queue changes on admission) may change only
// while the job is suspended, before or after the update: a running JobSet cannot
// take them, and Kueue changes them and resumes in one update. The other fields
// are immutable (the CRD's CEL rules say so first; this repeats it for clients
// that skip schema validation, such as dry runs against old CRDs).
func validateUpdate(oldJob, job *trainer.TrainJob) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	suspended := ptr.Deref(oldJob.Spec.Suspend, false) || ptr.Deref(job.Spec.Suspend, false)
	if !suspended {
		if !equality.Semantic.DeepEqual(oldJob.Spec.PodTemplateOverrides, job.Spec.PodTemplateOverrides) {
			errs = append(errs, field.Forbidden(spec.Child("podTemplateOverrides"), "may change only while the TrainJob is suspended"))
		}
		if !equality.Semantic.DeepEqual(stripTimes(oldJob.Spec.RuntimePatches), stripTimes(job.Spec.RuntimePatches)) {
			errs = append(errs, field.Forbidden(spec.Child("runtimePatches"), "may change only while the TrainJob is suspended"))
		}
		if !equality.Semantic.DeepEqual(oldJob.Spec.Labels, job.Spec.Labels) {
			errs = append(errs, field.Forbidden(spec.Child("labels"), "may change only while the TrainJob is suspended"))
		}
		if !equality.Semantic.DeepEqual(oldJob.Spec.Annotations, job.Spec.Annotations) {
			errs = append(errs, field.Forbidden(spec.Child("annotations"), "may change only while the TrainJob is suspended"))
		}
	}
	immutable := []struct {
		path     *field.Path
		old, new any
	}{
		{spec.Child("runtimeRef"), oldJob.Spec.RuntimeRef, job.Spec.RuntimeRef},
		{spec.Child("trainer"), oldJob.Spec.Trainer, job.Spec.Trainer},
		{spec.Child("initializer"), oldJob.Spec.Initializer, job.Spec.Initializer},
		{spec.Child("managedBy"), oldJob.Spec.ManagedBy, job.Spec.ManagedBy},
		{spec.Child("activeDeadlineSeconds"), oldJob.Spec.ActiveDeadlineSeconds, job.Spec.ActiveDeadlineSeconds},
	}
	for _, f := range immutable {
		if !equality.Semantic.DeepEqual(f.old, f.new) {
			errs = append(errs, field.Invalid(f.path, f.new, "field is immutable"))
		}
	}
	return errs
}

func stripTimes(ps []trainer.RuntimePatch) []trainer.RuntimePatch {
	out := make([]trainer.RuntimePatch, len(ps))
	for i, p := range ps {
		out[i] = *p.DeepCopy()
		out[i].Time = nil
	}
	return out
}

// ValidateAgainstRuntime checks a TrainJob against the runtime it will run on:
// every plugin's validation (overrides naming replicated jobs and containers
// that exist, pod host names that fit in a DNS label, ML policies some plugin
// runs, ...).
func ValidateAgainstRuntime(fw *framework.Framework, rt *runtime.Runtime, job *trainer.TrainJob) field.ErrorList {
	return fw.Validate(rt, runtime.TrainJobRequest(job))
}

func dedupe(errs field.ErrorList) field.ErrorList {
	seen := map[string]bool{}
	var out field.ErrorList
	for _, e := range errs {
		if k := e.Error(); !seen[k] {
			seen[k] = true
			out = append(out, e)
		}
	}
	return out
}
