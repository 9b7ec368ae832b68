// Package framework runs Trainyard's runtime plugins. Each extension point is a
// one-method interface; a plugin implements the ones it needs. Plugins run in the
// order they were given to New, which is declared in one place
// (pkg/runtime/plugins), never in map order.
package framework

import (
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
)

// Plugin is what every plugin is: a name, unique within a framework.
type Plugin interface {
	Name() string
}

// ValidatePlugin checks a TrainJob against its runtime. oldJob is nil on create.
// Errors carry field paths of the TrainJob (or of the runtime, under "runtime").
type ValidatePlugin interface {
	Plugin
	Validate(info *runtime.Info, oldJob, newJob *trainer.TrainJob) field.ErrorList
}

// MLPolicyPlugin shapes the training pods for the runtime's ML policy: node
// count, processes per node, the framework's distributed environment.
type MLPolicyPlugin interface {
	Plugin
	EnforceMLPolicy(info *runtime.Info, job *trainer.TrainJob) error
}

// PodGroupPolicyPlugin prepares the pods for gang scheduling.
type PodGroupPolicyPlugin interface {
	Plugin
	EnforcePodGroupPolicy(info *runtime.Info, job *trainer.TrainJob) error
}

// BuildPlugin emits the objects that run the TrainJob, from the finished Info.
// Objects carry no owner reference to the TrainJob yet; the caller adds it.
type BuildPlugin interface {
	Plugin
	Build(info *runtime.Info, job *trainer.TrainJob) ([]client.Object, error)
}

// StatusPlugin fills the part of a TrainJob's status that comes from its JobSet
// (nil when there is none). At most one is registered.
type StatusPlugin interface {
	Plugin
	Status(job *trainer.TrainJob, jobSet *jobsetv1alpha2.JobSet, status *trainer.TrainJobStatus)
}
