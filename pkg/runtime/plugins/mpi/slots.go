package mpi

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
)

// slots is the number of ranks per node: the TrainJob's numProcPerNode, else
// the runtime's (CRD default 1), except that the default 1 becomes the GPU
// count on nodes with more than one GPU. numProcPerNode "auto" is the
// default; "gpu" and "cpu" count the node's GPUs or CPUs.
func slots(info *runtime.Info, req *runtime.Request, pol *trainer.MPIMLPolicySource) (int32, *field.Error) {
	gpus, cpus := nodeResources(info, req)
	if t := req.Trainer; t != nil && t.NumProcPerNode != nil {
		v := *t.NumProcPerNode
		path := req.Paths.Trainer.Child("numProcPerNode")
		if err := runtime.CheckNumProcPerNode(path, v); err != nil {
			return 0, err
		}
		switch {
		case v.Type == intstr.Int:
			return v.IntVal, nil
		case v.StrVal == runtime.ProcCPU:
			return int32(max(cpus, 1)), nil
		case v.StrVal == runtime.ProcGPU:
			if gpus == 0 {
				return 0, field.Invalid(path, v.StrVal, "the MPI nodes request no GPUs (set resourcesPerNode with a GPU resource, or use an integer)")
			}
			return int32(gpus), nil
		}
	}
	n := ptr.Deref(pol.NumProcPerNode, 1)
	if n == 1 && gpus > 1 {
		n = int32(gpus)
	}
	return n, nil
}

// nodeResources counts the GPUs and CPUs of one node: from the TrainJob's
// resourcesPerNode alone when it is set, else from the node container of the
// first job named "node" or labelled as the trainer that declares resources.
func nodeResources(info *runtime.Info, req *runtime.Request) (gpus, cpus int64) {
	var res *corev1.ResourceRequirements
	if t := req.Trainer; t != nil && t.ResourcesPerNode != nil {
		res = t.ResourcesPerNode
	} else {
		for _, rj := range info.Spec.ReplicatedJobs {
			if rj.Name != NodeJob && rj.Template.Labels[trainer.AncestorLabel] != trainer.AncestorTrainer {
				continue
			}
			c := info.Container(rj.Name, trainer.NodeContainer)
			if c != nil && (len(c.Resources.Requests) > 0 || len(c.Resources.Limits) > 0) {
				res = &c.Resources
				break
			}
		}
	}
	if res == nil {
		return 0, 0
	}
	return gpuCount(*res), cpuCount(*res)
}

// gpuCount: the first resource whose name contains "gpu" (any case), from the
// requests, or from the limits when the requests give none.
func gpuCount(res corev1.ResourceRequirements) int64 {
	for _, list := range []corev1.ResourceList{res.Requests, res.Limits} {
		for name, q := range list {
			if strings.Contains(strings.ToLower(string(name)), "gpu") && q.Value() > 0 {
				return q.Value()
			}
		}
	}
	return 0
}

// cpuCount: whole CPUs, rounded up, from the request, else the limit.
func cpuCount(res corev1.ResourceRequirements) int64 {
	for _, list := range []corev1.ResourceList{res.Requests, res.Limits} {
		if q, ok := list[corev1.ResourceCPU]; ok && !q.IsZero() {
			return ceil(q)
		}
	}
	return 0
}

func ceil(q resource.Quantity) int64 { return (q.MilliValue() + 999) / 1000 }
