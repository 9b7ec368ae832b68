// Package plan holds what the runtime pipeline produces: the ordered child
// objects that run one job, each with the rule by which it is kept in line.
// A Plan is data: building one reads no cluster state and writes nothing; the
// child syncer (pkg/childsync) is the one place that applies a Plan.
package plan

import (
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// Rule says how the syncer keeps a child in line with its desired state.
type Rule string

const (
	// RuleJobSet is for the JobSet that runs the job: create it; never rewrite
	// it while it runs (only suspend it when the owner is suspended); re-render
	// it while suspended; recreate it when a part JobSet keeps immutable
	// changed. No-op writes are skipped by hash.
	RuleJobSet Rule = "JobSet"
	// RuleCreateOnce is for immutable objects (an SSH key Secret): created
	// when absent, never updated; an existing one is the job's for good.
	RuleCreateOnce Rule = "CreateOnce"
	// RuleApply is for everything else (a hostfile ConfigMap, a PodGroup):
	// server-side applied whenever the rendering changed (by hash).
	RuleApply Rule = "Apply"
	// RuleApplyWhileSuspended is for a gang's PodGroup: created when absent,
	// server-side applied (when the rendering changed) only while the owner is
	// suspended, and left alone once the owner runs: the scheduler is placing
	// its pods by then, and a changed group would split the gang.
	RuleApplyWhileSuspended Rule = "ApplyWhileSuspended"
)

// Child is one object of a Plan. Object is the desired state, typed, with its
// name and namespace set and no owner reference: the syncer adds the owner.
type Child struct {
	Object client.Object
	Rule   Rule
	// BeforeCreate, when set, completes Object just before the syncer creates
	// it, and is never called otherwise. It is for content that is costly or
	// random to make (an SSH key pair) on a child that is created once: the
	// pipeline stays cheap and pure on every pass, and the content is made
	// once, when it is needed.
	BeforeCreate func(client.Object) error
}

// JobSet returns the child for the job's JobSet.
func JobSet(js *jobsetv1alpha2.JobSet) Child { return Child{Object: js, Rule: RuleJobSet} }

// CreateOnce returns a child that is created once and never updated.
func CreateOnce(obj client.Object) Child { return Child{Object: obj, Rule: RuleCreateOnce} }

// CreateOnceWith returns a create-once child whose content fill makes just
// before it is created (see Child.BeforeCreate).
func CreateOnceWith(obj client.Object, fill func(client.Object) error) Child {
	return Child{Object: obj, Rule: RuleCreateOnce, BeforeCreate: fill}
}

// Apply returns a child that is applied whenever its rendering changes.
func Apply(obj client.Object) Child { return Child{Object: obj, Rule: RuleApply} }

// ApplyWhileSuspended returns a child that is created when absent and applied
// only while the owner is suspended.
func ApplyWhileSuspended(obj client.Object) Child {
	return Child{Object: obj, Rule: RuleApplyWhileSuspended}
}

// Plan is the ordered list of a job's children, and whether the job itself
// asks to be suspended (the JobSet rule suspends a running JobSet only then:
// a JobSet that a queue holds back is rendered suspended but never suspended
// by Trainyard once the queue started it).
type Plan struct {
	Children  []Child
	Suspended bool
}

// Add appends children in order.
func (p *Plan) Add(children ...Child) { p.Children = append(p.Children, children...) }

// Objects lists the desired objects in order (nil for a nil plan).
func (p *Plan) Objects() []client.Object {
	if p == nil {
		return nil
	}
	out := make([]client.Object, 0, len(p.Children))
	for _, c := range p.Children {
		out = append(out, c.Object)
	}
	return out
}

// JobSet returns the plan's JobSet, or nil.
func (p *Plan) JobSet() *jobsetv1alpha2.JobSet {
	for _, c := range p.Children {
		if js, ok := c.Object.(*jobsetv1alpha2.JobSet); ok {
			return js
		}
	}
	return nil
}
