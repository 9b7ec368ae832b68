// Package plainml handles runtimes with no framework policy: the trainer job gets
// the node count and nothing else, which is what a generic container job needs.
// It also refuses runtimes whose framework Trainyard does not run yet, instead of
// running them without the environment they expect.
package plainml

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
)

// Name of the plugin.
const Name = "PlainML"

// PlainML is the plugin.
type PlainML struct{}

var _ framework.ValidatePlugin = (*PlainML)(nil)

// New returns the plugin.
func New() *PlainML { return &PlainML{} }

// Name implements framework.Plugin.
func (*PlainML) Name() string { return Name }

// Validate rejects ML policies that no plugin implements.
func (*PlainML) Validate(info *runtime.Info, _, _ *trainer.TrainJob) field.ErrorList {
	mp := info.MLPolicy()
	if mp == nil {
		return nil
	}
	path := field.NewPath("spec", "runtimeRef")
	unsupported := func(policy string) field.ErrorList {
		return field.ErrorList{field.Invalid(path, info.Runtime.Name,
			"runtime "+info.Runtime.Kind+" "+info.Runtime.Name+" uses mlPolicy."+policy+", which Trainyard does not run yet (supported: torch, or no framework policy)")}
	}
	switch {
	case mp.MPI != nil:
		return unsupported("mpi")
	case mp.JAX != nil:
		return unsupported("jax")
	case mp.XGBoost != nil:
		return unsupported("xgboost")
	case mp.Flux != nil:
		return unsupported("flux")
	}
	return nil
}
