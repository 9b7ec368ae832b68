package runtime

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// Request is what one run of the pipeline is asked to run, whatever the job
// kind: the job's identity, what its trainer nodes run and how many there
// are, the overrides of the runtime's template, and its policies (suspension,
// queue, gang). Each kind's adapter makes one from its job, and the plugins
// read nothing else of the job: a TrainJob fills every field (TrainJobRequest),
// a kind that brings complete pod templates in its runtime (a PyTorchJob)
// only its identity and policies. A Request is read-only to the plugins.
//
// Trainer and Initializer are the runtime API's own vocabulary (the v2 API's
// Trainer and Initializer types), which is what a runtime template is written
// for; they are not the TrainJob object.
type Request struct {
	// Name and Namespace are the job's; its children are named after it.
	Name, Namespace string
	// Labels are the job's labels (a queue's name and priority class).
	Labels map[string]string
	// Suspend: the job asks to be suspended (its JobSet is rendered, and
	// kept, suspended).
	Suspend bool
	// Trainer is what the trainer nodes run and how many there are, on top
	// of the runtime's template (nil: the template as it is).
	Trainer *trainer.Trainer
	// Initializer configures the dataset and model initializers (nil: none).
	Initializer *trainer.Initializer
	// Patches are overrides of the runtime's template, applied in order
	// before Trainer (each carries the path of the field it came from).
	Patches []Patch
	// Gang overrides what the gang plugins derive for the job's PodGroup
	// (nil: nothing).
	Gang *GangPolicy
	// Paths say where the values above are in the job the user wrote.
	Paths Paths
}

// Paths say where a request's values are in the job the user wrote, so that
// a plugin's field error names the field to fix. A nil path names a value
// that has no field of its own in the job.
type Paths struct {
	// Name is the job's name (metadata.name).
	Name *field.Path
	// Labels are the job's labels (metadata.labels).
	Labels *field.Path
	// Annotations are the annotations the job gives its JobSet (a
	// TrainJob's spec.annotations).
	Annotations *field.Path
	// Runtime is the field that names or holds the runtime (a TrainJob's
	// spec.runtimeRef, a PyTorchJob's replica specs).
	Runtime *field.Path
	// Trainer is where Request.Trainer comes from (spec.trainer).
	Trainer *field.Path
	// Spec is the job's spec.
	Spec *field.Path
}

// GangPolicy overrides what a gang plugin derives for a job's PodGroup from
// its pods (runtime.Gang) and its runtime: each set field replaces the
// derived value (v1's runPolicy.schedulingPolicy).
type GangPolicy struct {
	// MinMember is the number of pods placed at once.
	MinMember *int32
	// MinResources replaces the summed requests (empty: none at all).
	MinResources *corev1.ResourceList
	// Queue is the gang scheduler's queue (Volcano's).
	Queue string
	// PriorityClass is the PodGroup's priority class (Volcano's).
	PriorityClass string
}

// Apply returns g with the policy's minMember and minResources.
func (p *GangPolicy) Apply(g Gang) Gang {
	if p == nil {
		return g
	}
	if p.MinMember != nil {
		g.MinMember = *p.MinMember
	}
	if p.MinResources != nil {
		g.MinResources = p.MinResources.DeepCopy()
	}
	return g
}
