// Package framework runs Trainyard's runtime plugins. Each extension point is a
// one-method interface; a plugin implements the ones it needs. Plugins run in
// the order they were given to New, which is declared in one place
// (pkg/runtime/plugins), never in map order. Plugins are pure: they read the
// TrainJob and the Info, never a client, and never change the TrainJob or the
// runtime.
package framework

import (
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/observe"
	"github.com/trainyard/trainyard/pkg/plan"
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

// PolicyClaimer says which ML policy sources (see PolicyNames: "torch", "mpi",
// ...) a plugin runs. A runtime whose policy no plugin claims is rejected,
// rather than run without the environment it expects.
type PolicyClaimer interface {
	Plugin
	ClaimsMLPolicies() []string
}

// PodGroupPolicyPlugin prepares the pods for gang scheduling.
type PodGroupPolicyPlugin interface {
	Plugin
	EnforcePodGroupPolicy(info *runtime.Info, job *trainer.TrainJob) error
}

// BuildPlugin emits children of the TrainJob from the finished Info, each with
// its sync rule. Objects carry no owner reference; the syncer adds it.
type BuildPlugin interface {
	Plugin
	Build(info *runtime.Info, job *trainer.TrainJob) ([]plan.Child, error)
}

// OwnerPlugin declares the kinds of children a plugin's Build emits (an empty
// object of each kind). The manager watches exactly these kinds, and the
// manager's RBAC must cover them (each plugin package carries the kubebuilder
// RBAC markers for its kinds; a test checks the two agree).
type OwnerPlugin interface {
	Plugin
	Owns() []client.Object
}

// StatusPlugin fills the part of a TrainJob's status that comes from its
// children, from what the reconciler observed (never a client).
type StatusPlugin interface {
	Plugin
	Status(job *trainer.TrainJob, obs *observe.Observed, status *trainer.TrainJobStatus)
}

// GangPlugin explains why a job's pods wait to be placed as one gang, from
// the child a gang scheduler updates (its PodGroup). waiting is false when
// the plugin has no gang for the job, or the gang is placed: the pods then
// speak for themselves.
type GangPlugin interface {
	Plugin
	GangWaiting(job *trainer.TrainJob, obs *observe.Observed) (reason, message string, waiting bool)
}
