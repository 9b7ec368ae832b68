package framework

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
)

var (
	errDuplicatePlugin  = errors.New("duplicate plugin name")
	errTooManyStatus    = errors.New("more than one status plugin")
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
	status         StatusPlugin
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
		points := 0
		if v, ok := p.(ValidatePlugin); ok {
			f.validate = append(f.validate, v)
			points++
		}
		if v, ok := p.(MLPolicyPlugin); ok {
			f.mlPolicy = append(f.mlPolicy, v)
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
		if v, ok := p.(StatusPlugin); ok {
			if f.status != nil {
				return nil, fmt.Errorf("registering %q after %q: %w", name, f.status.Name(), errTooManyStatus)
			}
			f.status = v
			points++
		}
		if points == 0 {
			return nil, fmt.Errorf("registering %q: %w", name, errNoExtensionPoint)
		}
	}
	return f, nil
}

// Names lists the plugins in the order they run.
func (f *Framework) Names() []string { return append([]string(nil), f.names...) }

// InvalidError is a TrainJob or runtime the pipeline cannot build: retrying will
// not help until one of them changes.
type InvalidError struct {
	Errs field.ErrorList
}

func (e *InvalidError) Error() string { return e.Errs.ToAggregate().Error() }

// IsInvalid reports whether err (or an error it wraps) is an InvalidError.
func IsInvalid(err error) bool {
	var ie *InvalidError
	return errors.As(err, &ie)
}

func invalid(err error) error {
	var fe *field.Error
	if errors.As(err, &fe) {
		return &InvalidError{Errs: field.ErrorList{fe}}
	}
	return err
}

// Validate runs every ValidatePlugin against an Info built for newJob. oldJob is
// nil on create.
func (f *Framework) Validate(rt *runtime.Runtime, oldJob, newJob *trainer.TrainJob) field.ErrorList {
	info, err := runtime.NewInfo(newJob, rt)
	if err != nil {
		var fe *field.Error
		if errors.As(err, &fe) {
			return field.ErrorList{fe}
		}
		return field.ErrorList{field.InternalError(field.NewPath("spec"), err)}
	}
	return f.validateInfo(info, oldJob, newJob)
}

func (f *Framework) validateInfo(info *runtime.Info, oldJob, newJob *trainer.TrainJob) field.ErrorList {
	var errs field.ErrorList
	for _, p := range f.validate {
		errs = append(errs, p.Validate(info, oldJob, newJob)...)
	}
	return errs
}

// Build runs the pipeline for a TrainJob on a runtime and returns the objects
// that run it. The TrainJob and the runtime are not modified. An input the
// pipeline rejects is returned as an *InvalidError.
func (f *Framework) Build(job *trainer.TrainJob, rt *runtime.Runtime) ([]client.Object, error) {
	info, err := runtime.NewInfo(job, rt)
	if err != nil {
		return nil, invalid(err)
	}
	if errs := f.validateInfo(info, nil, job); len(errs) > 0 {
		return nil, &InvalidError{Errs: errs}
	}
	for _, p := range f.mlPolicy {
		if err := p.EnforceMLPolicy(info, job); err != nil {
			return nil, invalid(fmt.Errorf("plugin %s: %w", p.Name(), err))
		}
	}
	for _, p := range f.podGroupPolicy {
		if err := p.EnforcePodGroupPolicy(info, job); err != nil {
			return nil, invalid(fmt.Errorf("plugin %s: %w", p.Name(), err))
		}
	}
	var objs []client.Object
	for _, p := range f.build {
		out, err := p.Build(info, job)
		if err != nil {
			return nil, invalid(fmt.Errorf("plugin %s: %w", p.Name(), err))
		}
		objs = append(objs, out...)
	}
	return objs, nil
}

// Status lets the status plugin fill status from the observed JobSet.
func (f *Framework) Status(job *trainer.TrainJob, jobSet *jobsetv1alpha2.JobSet, status *trainer.TrainJobStatus) {
	if f.status != nil {
		f.status.Status(job, jobSet, status)
	}
}
