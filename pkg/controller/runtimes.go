package controller

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
)

// errRuntimeNotFound: the referenced runtime does not exist (yet). The TrainJob
// waits; creating the runtime wakes it up (see runtimeToTrainJobs).
var errRuntimeNotFound = errors.New("runtime not found")

// errUnsupportedRuntime: the reference is to a kind Trainyard cannot run.
var errUnsupportedRuntime = errors.New("unsupported runtime")

// resolveRuntime reads the live runtime a TrainJob refers to.
func resolveRuntime(ctx context.Context, c client.Reader, job *trainer.TrainJob) (*runtime.Runtime, error) {
	kind, err := runtime.RefKind(job.Spec.RuntimeRef)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errUnsupportedRuntime, err)
	}
	name := job.Spec.RuntimeRef.Name
	switch kind {
	case trainer.TrainingRuntimeKind:
		var rt trainer.TrainingRuntime
		if err := c.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: name}, &rt); err != nil {
			return nil, notFoundAs(err, kind, job.Namespace+"/"+name)
		}
		return runtime.FromTrainingRuntime(&rt), nil
	default:
		var rt trainer.ClusterTrainingRuntime
		if err := c.Get(ctx, types.NamespacedName{Name: name}, &rt); err != nil {
			return nil, notFoundAs(err, kind, name)
		}
		return runtime.FromClusterTrainingRuntime(&rt), nil
	}
}

func notFoundAs(err error, kind, name string) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: %s %q does not exist; create it, or fix spec.runtimeRef", errRuntimeNotFound, kind, name)
	}
	return fmt.Errorf("getting %s %q: %w", kind, name, err)
}

// runtimeRefKey is the index value of a TrainJob's runtime reference.
func runtimeRefKey(job *trainer.TrainJob) []string {
	kind, err := runtime.RefKind(job.Spec.RuntimeRef)
	if err != nil {
		return nil
	}
	return []string{kind + "/" + job.Spec.RuntimeRef.Name}
}
