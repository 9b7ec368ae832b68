// Package resources merges a TrainJob's resourcesPerNode into the runtime's
// trainer container. It runs before the ML-policy plugins, so that they (the
// torch plugin's "auto" process count, say) see the merged resources, not only
// what the TrainJob or only what the runtime declared.
package resources

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
)

// Name of the plugin.
const Name = "Resources"

// Resources is the plugin.
type Resources struct{}

var (
	_ framework.ValidatePlugin = (*Resources)(nil)
	_ framework.MLPolicyPlugin = (*Resources)(nil)
)

// New returns the plugin.
func New() *Resources { return &Resources{} }

// Name implements framework.Plugin.
func (*Resources) Name() string { return Name }

// Validate rejects resourcesPerNode on a runtime without a trainer container,
// and merged resources whose request exceeds their limit (the pods could never be
// created, and the job would hang).
func (*Resources) Validate(info *runtime.Info, _, job *trainer.TrainJob) field.ErrorList {
	if job.Spec.Trainer == nil || job.Spec.Trainer.ResourcesPerNode == nil {
		return nil
	}
	path := field.NewPath("spec", "trainer", "resourcesPerNode")
	c := info.TrainerContainer()
	if c == nil {
		return field.ErrorList{field.Invalid(path, "", fmt.Sprintf("runtime %s %q has no trainer %q container to put resources on",
			info.Runtime.Kind, info.Runtime.Name, trainer.NodeContainer))}
	}
	merged := Merge(c.Resources, *job.Spec.Trainer.ResourcesPerNode)
	var errs field.ErrorList
	// Sorted, so that the same input always gives the same message (it ends up in
	// a status condition; a changing message would rewrite status forever).
	for _, name := range slices.Sorted(maps.Keys(merged.Requests)) {
		req := merged.Requests[name]
		if lim, ok := merged.Limits[name]; ok && req.Cmp(lim) > 0 {
			errs = append(errs, field.Invalid(path.Child("requests").Key(string(name)), req.String(),
				fmt.Sprintf("must be less than or equal to the %s limit %s (after merging with the runtime's resources)", name, lim.String())))
		}
	}
	return errs
}

// EnforceMLPolicy merges resourcesPerNode into the trainer container.
func (*Resources) EnforceMLPolicy(info *runtime.Info, job *trainer.TrainJob) error {
	if job.Spec.Trainer == nil || job.Spec.Trainer.ResourcesPerNode == nil {
		return nil
	}
	c := info.TrainerContainer()
	if c == nil {
		return field.Invalid(field.NewPath("spec", "trainer", "resourcesPerNode"), "", "runtime has no trainer container")
	}
	c.Resources = Merge(c.Resources, *job.Spec.Trainer.ResourcesPerNode)
	return nil
}

// Merge overlays override on base key by key (override wins), then gives every
// resource that has a limit but no request a request equal to the limit. That is
// what the API server would do for the pod anyway; doing it in the template keeps
// GPU requests visible to quota systems such as Kueue, which read the template.
func Merge(base, override corev1.ResourceRequirements) corev1.ResourceRequirements {
	out := *base.DeepCopy()
	if len(override.Requests) > 0 && out.Requests == nil {
		out.Requests = corev1.ResourceList{}
	}
	for k, v := range override.Requests {
		out.Requests[k] = v.DeepCopy()
	}
	if len(override.Limits) > 0 && out.Limits == nil {
		out.Limits = corev1.ResourceList{}
	}
	for k, v := range override.Limits {
		out.Limits[k] = v.DeepCopy()
	}
	for _, c := range override.Claims {
		replaced := false
		for i := range out.Claims {
			if out.Claims[i].Name == c.Name {
				out.Claims[i] = c
				replaced = true
			}
		}
		if !replaced {
			out.Claims = append(out.Claims, c)
		}
	}
	for k, v := range out.Limits {
		if _, ok := out.Requests[k]; !ok {
			if out.Requests == nil {
				out.Requests = corev1.ResourceList{}
			}
			out.Requests[k] = v.DeepCopy()
		}
	}
	return out
}
