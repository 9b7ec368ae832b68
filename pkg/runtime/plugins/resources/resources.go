// Package resources merges a TrainJob's resourcesPerNode into the runtime's
// trainer container. It runs before the ML-policy plugins, so that they (the
// torch plugin's "auto" process count, say) see the merged resources, not only
// what the TrainJob or only what the runtime declared.
package resources

import (
	"fmt"
	"maps"
	"slices"

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
func (*Resources) Validate(info *runtime.Info, req *runtime.Request) field.ErrorList {
	if req.Trainer == nil || req.Trainer.ResourcesPerNode == nil {
		return nil
	}
	path := req.Paths.Trainer.Child("resourcesPerNode")
	c := info.TrainerContainer()
	if c == nil {
		return field.ErrorList{field.Invalid(path, "", fmt.Sprintf("runtime %s %q has no trainer %q container to put resources on",
			info.Runtime.Kind, info.Runtime.Name, trainer.NodeContainer))}
	}
	merged := runtime.MergeResources(c.Resources, *req.Trainer.ResourcesPerNode)
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
func (*Resources) EnforceMLPolicy(info *runtime.Info, req *runtime.Request) error {
	if req.Trainer == nil || req.Trainer.ResourcesPerNode == nil {
		return nil
	}
	c := info.TrainerContainer()
	if c == nil {
		return field.Invalid(req.Paths.Trainer.Child("resourcesPerNode"), "", "runtime has no trainer container")
	}
	c.Resources = runtime.MergeResources(c.Resources, *req.Trainer.ResourcesPerNode)
	return nil
}
