package pytorchjob

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/jobset"
)

// Plugins are the PyTorchJob pipeline's plugins, in the order they run: the v1
// environment (ML-policy point), then the Services and the shared JobSet
// plugin (build point). The TrainJob plugins for resources, torch, plain ML and
// gang scheduling are not used: a PyTorchJob brings complete pod templates,
// v1's environment replaces the torch plugin's, and Kueue queues the
// PyTorchJob itself, never its JobSet.
func Plugins(job *kubeflowv1.PyTorchJob) []framework.Plugin {
	return []framework.Plugin{NewEnvPlugin(job), NewServicesPlugin(job), jobset.New()}
}

// Result is what a PyTorchJob runs as.
type Result struct {
	JobSet   *jobsetv1alpha2.JobSet
	Services []*corev1.Service
}

// Build runs the pipeline for a defaulted, valid PyTorchJob. The JobSet and
// Services carry no owner reference yet. Input the pipeline rejects is
// returned as a *framework.InvalidError.
func Build(job *kubeflowv1.PyTorchJob) (*Result, error) {
	rt, err := ToRuntime(job)
	if err != nil {
		return nil, fmt.Errorf("converting PyTorchJob %s: %w", job.Name, err)
	}
	fw, err := framework.New(Plugins(job)...)
	if err != nil {
		return nil, fmt.Errorf("registering PyTorchJob plugins: %w", err)
	}
	objs, err := fw.Build(ToTrainJob(job), rt)
	if err != nil {
		return nil, err
	}
	res := &Result{}
	for _, o := range objs {
		switch v := o.(type) {
		case *jobsetv1alpha2.JobSet:
			if res.JobSet != nil {
				return nil, fmt.Errorf("pipeline returned more than one JobSet")
			}
			res.JobSet = v
		case *corev1.Service:
			res.Services = append(res.Services, v)
		default:
			return nil, fmt.Errorf("pipeline returned an unexpected %T", o)
		}
	}
	if res.JobSet == nil {
		return nil, fmt.Errorf("pipeline returned no JobSet")
	}
	return res, nil
}
