package validation

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/volcano"
)

// ValidateLookups runs the checks that need to read other objects of the
// cluster, which the pure plugins cannot: today, that a Volcano PodGroup's
// PriorityClass exists. The admission webhook runs it, and so does the
// controller before a job's first JobSet, so that the same field error shows
// in status when the webhook is not installed.
func ValidateLookups(ctx context.Context, r client.Reader, job *trainer.TrainJob, rt *runtime.Runtime) field.ErrorList {
	info, err := runtime.NewInfo(job, rt)
	if err != nil {
		return nil // the pure validation reports it
	}
	return volcano.ValidatePriorityClass(ctx, r, info)
}
