// Package framework runs Trainyard's runtime plugins. Each extension point is a
// one-method interface; a plugin implements the ones it needs. Plugins run in
// the order they were given to New, which is declared in one place
// (pkg/runtime/plugins), never in map order. Plugins are pure: they read the
// request (runtime.Request: what a job of any kind asks to run) and the Info,
// never a client, and never change the request, the job or the runtime.
package framework

import (
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainyard/trainyard/pkg/observe"
	"github.com/trainyard/trainyard/pkg/plan"
	"github.com/trainyard/trainyard/pkg/runtime"
)

// Plugin is what every plugin is: a name, unique within a framework.
type Plugin interface {
	Name() string
}

// ValidatePlugin checks a request against its runtime. Errors carry the
// paths of the job's fields (req.Paths), or of the runtime's (under
// "runtime").
type ValidatePlugin interface {
	Plugin
	Validate(info *runtime.Info, req *runtime.Request) field.ErrorList
}

// MLPolicyPlugin shapes the training pods for the runtime's ML policy: node
// count, processes per node, the framework's distributed environment.
type MLPolicyPlugin interface {
	Plugin
	EnforceMLPolicy(info *runtime.Info, req *runtime.Request) error
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
	EnforcePodGroupPolicy(info *runtime.Info, req *runtime.Request) error
}

// BuildPlugin emits children of the job from the finished Info, each with
// its sync rule. Objects carry no owner reference; the syncer adds it.
type BuildPlugin interface {
	Plugin
	Build(info *runtime.Info, req *runtime.Request) ([]plan.Child, error)
}

// OwnerPlugin declares the kinds of children a plugin's Build emits (an empty
// object of each kind). The manager watches exactly these kinds, and the
// manager's RBAC must cover them (each plugin package carries the kubebuilder
// RBAC markers for its kinds; a test checks the two agree).
type OwnerPlugin interface {
	Plugin
	Owns() []client.Object
}

// StatusPlugin tells what it reads of the children it emits, from what the
// reconciler observed of the job named name (never a client): facts in no
// kind's terms, which each kind maps onto its own status.
type StatusPlugin interface {
	Plugin
	Status(name string, obs *observe.Observed, facts *Facts)
}

// Facts are what the status plugins read of a job's children.
type Facts struct {
	// Finished is how the job's JobSet finished, nil while it runs (or has
	// none).
	Finished *observe.Finish
	// Jobs are the counts of the JobSet's replicated jobs, in its order
	// (nil: no JobSet; empty: it reports none yet).
	Jobs []observe.JobCounts
	// Gang says why the job's pods wait to be placed as one gang (a PodGroup
	// the scheduler has not placed yet); nil when no gang plugin says so:
	// the pods then speak for themselves.
	Gang *Waiting
}

// Waiting is why something waits: a reason (one word) and a message.
type Waiting struct {
	Reason, Message string
}
