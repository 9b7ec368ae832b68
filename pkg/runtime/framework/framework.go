package framework

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/observe"
	"github.com/trainyard/trainyard/pkg/plan"
	"github.com/trainyard/trainyard/pkg/runtime"
)

var (
	errDuplicatePlugin  = errors.New("duplicate plugin name")
	errNoExtensionPoint = errors.New("plugin implements no extension point")
	errUnnamedPlugin    = errors.New("plugin has an empty name")
)

// Framework holds plugins sorted into their extension points, each list in the
// declared order.
type Framework struct {
	names          []string
	validate       []ValidatePlugin
	mlPolicy       []MLPolicyPlugin
	podGroupPolicy []PodGroupPolicyPlugin
	build          []BuildPlugin
	status         []StatusPlugin
	owns           []client.Object
	claimed        []string
}

// New checks the plugins and sorts them into extension points. The order of the
// arguments is the order in which every extension point runs.
func New(plugins ...Plugin) (*Framework, error) {
	f := &Framework{}
	seen := map[string]bool{}
	for _, p := range plugins {
		name := p.Name()
		if name == "" {
			return nil, fmt.Errorf("registering %T: %w", p, errUnnamedPlugin)
		}
		if seen[name] {
			return nil, fmt.Errorf("registering %q: %w", name, errDuplicatePlugin)
		}
		seen[name] = true
		f.names = append(f.names, name)
		if f.register(p) == 0 {
			return nil, fmt.Errorf("registering %q: %w", name, errNoExtensionPoint)
		}
	}
	return f, nil
}

// register sorts one plugin into the points it implements and counts them.
func (f *Framework) register(p Plugin) int {
	points := 0
	if v, ok := p.(ValidatePlugin); ok {
		f.validate = append(f.validate, v)
		points++
	}
	if v, ok := p.(MLPolicyPlugin); ok {
		f.mlPolicy = append(f.mlPolicy, v)
		points++
	}
	if v, ok := p.(PolicyClaimer); ok {
		f.claimed = append(f.claimed, v.ClaimsMLPolicies()...)
		points++
	}
	if v, ok := p.(PodGroupPolicyPlugin); ok {
		f.podGroupPolicy = append(f.podGroupPolicy, v)
		points++
	}
	if v, ok := p.(BuildPlugin); ok {
		f.build = append(f.build, v)
		points++
	}
	if v, ok := p.(OwnerPlugin); ok {
		f.owns = append(f.owns, v.Owns()...)
		points++
	}
	if v, ok := p.(StatusPlugin); ok {
		f.status = append(f.status, v)
		points++
	}
	return points
}

// Names lists the plugins in the order they run.
func (f *Framework) Names() []string { return slices.Clone(f.names) }

// Owns lists the kinds of children the plugins emit (an empty object each), in
// plugin order.
func (f *Framework) Owns() []client.Object { return slices.Clone(f.owns) }

// ClaimedPolicies lists the ML policy names some plugin runs, sorted.
func (f *Framework) ClaimedPolicies() []string {
	out := slices.Clone(f.claimed)
	slices.Sort(out)
	return slices.Compact(out)
}

// PolicyNames lists the ML policy sources a policy sets, by their field names
// under spec.mlPolicy.
func PolicyNames(mp *trainer.MLPolicy) []string {
	if mp == nil {
		return nil
	}
	var out []string
	for _, s := range []struct {
		name string
		set  bool
	}{{"torch", mp.Torch != nil}, {"mpi", mp.MPI != nil}, {"jax", mp.JAX != nil}, {"xgboost", mp.XGBoost != nil}, {"flux", mp.Flux != nil}} {
		if s.set {
			out = append(out, s.name)
		}
	}
	return out
}

// UnclaimedPolicies lists the policy sources of mp that no plugin runs.
func (f *Framework) UnclaimedPolicies(mp *trainer.MLPolicy) []string {
	var out []string
	for _, n := range PolicyNames(mp) {
		if !slices.Contains(f.claimed, n) {
			out = append(out, n)
		}
	}
	return out
}

// RuntimeWarnings are the admission warnings for a runtime: policies that no
// plugin runs (TrainJobs on such a runtime are rejected).
func (f *Framework) RuntimeWarnings(spec *trainer.TrainingRuntimeSpec) []string {
	var out []string
	for _, n := range f.UnclaimedPolicies(spec.MLPolicy) {
		out = append(out, fmt.Sprintf("spec.mlPolicy.%s: Trainyard does not run %s runtimes yet; TrainJobs on this runtime will be rejected", n, n))
	}
	return out
}

// validatePolicies rejects a runtime whose policy no plugin claims.
func (f *Framework) validatePolicies(info *runtime.Info, req *runtime.Request) field.ErrorList {
	unclaimed := f.UnclaimedPolicies(info.MLPolicy())
	if len(unclaimed) == 0 {
		return nil
	}
	supported := append(f.ClaimedPolicies(), "or no framework policy")
	return field.ErrorList{field.Invalid(req.Paths.Runtime, info.Runtime.Name,
		fmt.Sprintf("runtime %s %s uses mlPolicy.%s, which Trainyard does not run yet (supported: %s)",
			info.Runtime.Kind, info.Runtime.Name, unclaimed[0], strings.Join(supported, ", ")))}
}

// InvalidError is a TrainJob or runtime the pipeline cannot build: retrying will
// not help until one of them changes, unless Recheck says so.
type InvalidError struct {
	Errs field.ErrorList
	// Recheck marks errors found by looking up other objects (a PriorityClass
	// that does not exist yet): they can go away without an edit of the job,
	// so the controller looks again later.
	Recheck bool
}

func (e *InvalidError) Error() string { return e.Errs.ToAggregate().Error() }

// IsInvalid reports whether err (or an error it wraps) is an InvalidError.
func IsInvalid(err error) bool {
	var ie *InvalidError
	return errors.As(err, &ie)
}

// NeedsRecheck reports whether err is an InvalidError found by a lookup.
func NeedsRecheck(err error) bool {
	var ie *InvalidError
	return errors.As(err, &ie) && ie.Recheck
}

func invalid(err error) error {
	var fe *field.Error
	if errors.As(err, &fe) {
		return &InvalidError{Errs: field.ErrorList{fe}}
	}
	return err
}

// Validate runs every ValidatePlugin against an Info built for req.
func (f *Framework) Validate(rt *runtime.Runtime, req *runtime.Request) field.ErrorList {
	info, err := runtime.NewInfo(req, rt)
	if err != nil {
		var fe *field.Error
		if errors.As(err, &fe) {
			return field.ErrorList{fe}
		}
		return field.ErrorList{field.InternalError(req.Paths.Spec, err)}
	}
	return f.validateInfo(info, req)
}

func (f *Framework) validateInfo(info *runtime.Info, req *runtime.Request) field.ErrorList {
	errs := f.validatePolicies(info, req)
	for _, p := range f.validate {
		errs = append(errs, p.Validate(info, req)...)
	}
	return errs
}

// Build runs the pipeline for a request on a runtime and returns the plan of
// children that run it. The request and the runtime are not modified. An
// input the pipeline rejects is returned as an *InvalidError.
func (f *Framework) Build(req *runtime.Request, rt *runtime.Runtime) (*plan.Plan, error) {
	info, err := runtime.NewInfo(req, rt)
	if err != nil {
		return nil, invalid(err)
	}
	if errs := f.validateInfo(info, req); len(errs) > 0 {
		return nil, &InvalidError{Errs: errs}
	}
	for _, p := range f.mlPolicy {
		if err := p.EnforceMLPolicy(info, req); err != nil {
			return nil, invalid(fmt.Errorf("plugin %s: %w", p.Name(), err))
		}
	}
	for _, p := range f.podGroupPolicy {
		if err := p.EnforcePodGroupPolicy(info, req); err != nil {
			return nil, invalid(fmt.Errorf("plugin %s: %w", p.Name(), err))
		}
	}
	out := &plan.Plan{Suspended: req.Suspend}
	for _, p := range f.build {
		children, err := p.Build(info, req)
		if err != nil {
			return nil, invalid(fmt.Errorf("plugin %s: %w", p.Name(), err))
		}
		out.Add(children...)
	}
	return out, nil
}

// Status lets the status plugins, in order, tell what they read of the
// children of the job named name.
func (f *Framework) Status(name string, obs *observe.Observed) Facts {
	var facts Facts
	for _, p := range f.status {
		p.Status(name, obs, &facts)
	}
	return facts
}
