package pytorchjob

import (
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/plan"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
	"github.com/trainyard/trainyard/pkg/runtime/plugins"
)

// Plugins are the PyTorchJob pipeline's plugins, in the order they run: the
// Services, then the plugins of every kind that brings complete pod
// templates (plugins.ForPodTemplates: the gang schedulers' PodGroups and the
// JobSet). The Services come first in the plan, so that they exist before any
// pod looks its master up. v1's environment is part of the runtime
// conversion (ToRuntime).
//
// The coscheduling and Volcano plugins build the gang's PodGroup when the
// manager runs PyTorchJobs under a gang scheduler (see GangScheduler): they
// act only on runtimes that ask for one.
func Plugins() []framework.Plugin {
	return append([]framework.Plugin{NewServicesPlugin()}, plugins.ForPodTemplates()...)
}

// NewFramework returns the PyTorchJob pipeline, built once by its controller.
func NewFramework() (*framework.Framework, error) { return framework.New(Plugins()...) }

// Owned lists the child kinds a PyTorchJob's plan has.
func Owned() []client.Object {
	fw, err := NewFramework()
	if err != nil {
		return nil
	}
	return fw.Owns()
}

// Build runs the pipeline fw (NewFramework) for a defaulted, valid PyTorchJob
// and returns its plan: its Services, then its JobSet. Input the pipeline
// rejects is returned as a *framework.InvalidError.
func Build(fw *framework.Framework, job *kubeflowv1.PyTorchJob) (*plan.Plan, error) {
	return BuildWithGang(fw, job, GangNone)
}

// BuildWithGang is Build under a gang scheduler (GangNone for none).
func BuildWithGang(fw *framework.Framework, job *kubeflowv1.PyTorchJob, gs GangScheduler) (*plan.Plan, error) {
	rt, err := ToRuntime(job)
	if err != nil {
		return nil, fmt.Errorf("converting PyTorchJob %s: %w", job.Name, err)
	}
	withGang(rt, job, gs)
	p, err := fw.Build(ToRequest(job, gs), rt)
	if err != nil {
		return nil, err
	}
	if p.JobSet() == nil {
		return nil, fmt.Errorf("pipeline returned no JobSet")
	}
	return p, nil
}
