package runtime

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// ErrNotFound means the referenced runtime does not exist (yet).
var ErrNotFound = errors.New("runtime not found")

// ErrUnsupported means the reference is to a kind Trainyard cannot run.
var ErrUnsupported = errors.New("unsupported runtime")

// Resolve reads the live runtime a TrainJob refers to. Errors wrap ErrNotFound
// or ErrUnsupported where they apply.
func Resolve(ctx context.Context, c client.Reader, job *trainer.TrainJob) (*Runtime, error) {
	kind, err := RefKind(job.Spec.RuntimeRef)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnsupported, err)
	}
	name := job.Spec.RuntimeRef.Name
	if kind == trainer.TrainingRuntimeKind {
		var rt trainer.TrainingRuntime
		if err := c.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: name}, &rt); err != nil {
			return nil, notFoundAs(err, kind, job.Namespace+"/"+name)
		}
		return FromTrainingRuntime(&rt), nil
	}
	var rt trainer.ClusterTrainingRuntime
	if err := c.Get(ctx, types.NamespacedName{Name: name}, &rt); err != nil {
		return nil, notFoundAs(err, kind, name)
	}
	return FromClusterTrainingRuntime(&rt), nil
}

func notFoundAs(err error, kind, name string) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: %s %q does not exist; create it, or fix spec.runtimeRef", ErrNotFound, kind, name)
	}
	return fmt.Errorf("getting %s %q: %w", kind, name, err)
}
