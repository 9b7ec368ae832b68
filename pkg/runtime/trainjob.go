package runtime

import (
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// TrainJobPaths are where a TrainJob holds what its Request carries.
var TrainJobPaths = Paths{
	Name:        field.NewPath("metadata", "name"),
	Labels:      field.NewPath("metadata", "labels"),
	Annotations: field.NewPath("spec", "annotations"),
	Runtime:     field.NewPath("spec", "runtimeRef"),
	Trainer:     field.NewPath("spec", "trainer"),
	Spec:        field.NewPath("spec"),
}

// TrainJobRequest is the Request of a TrainJob: a TrainJob is written in the
// runtime API's own terms, so each of its fields maps onto one of the
// Request's (its overrides through NormalizePatches). The TrainJob kind's
// adapter and webhook make the pipeline's input with it; nothing of the
// TrainJob reaches a plugin but this.
func TrainJobRequest(job *trainer.TrainJob) *Request {
	return &Request{
		Name:        job.Name,
		Namespace:   job.Namespace,
		Labels:      job.Labels,
		Suspend:     ptr.Deref(job.Spec.Suspend, false),
		Trainer:     job.Spec.Trainer,
		Initializer: job.Spec.Initializer,
		Patches:     NormalizePatches(job),
		Paths:       TrainJobPaths,
	}
}
