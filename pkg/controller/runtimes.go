package controller

import (
	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
)

// Errors of runtime resolution, as the controller reports them.
var (
	// errRuntimeNotFound: the TrainJob waits; creating the runtime wakes it up
	// (see runtimeToTrainJobs).
	errRuntimeNotFound = runtime.ErrNotFound
	// errUnsupportedRuntime: the reference is to a kind Trainyard cannot run.
	errUnsupportedRuntime = runtime.ErrUnsupported
	resolveRuntime        = runtime.Resolve
)

// runtimeRefKey is the index value of a TrainJob's runtime reference.
func runtimeRefKey(job *trainer.TrainJob) []string {
	kind, err := runtime.RefKind(job.Spec.RuntimeRef)
	if err != nil {
		return nil
	}
	return []string{kind + "/" + job.Spec.RuntimeRef.Name}
}
