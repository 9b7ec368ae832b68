package view

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/trainyard/trainyard/pkg/processnode/gpus"
)

// Step is one pod of a job, as the Kubeflow SDK shows a TrainJob's steps.
type Step struct {
	// Name names the pod's part of the job: node-<rank> for a TrainJob's
	// trainer pods, an initializer's name, a PyTorchJob's replica (master-0).
	Name        string `json:"name"`
	Status      string `json:"status"`
	Pod         string `json:"pod"`
	Device      string `json:"device"`
	DeviceCount string `json:"deviceCount"`
	// Message is why a failed step's container ended, when its pod says
	// (the termination message; with terminationMessagePolicy
	// FallbackToLogsOnError, the end of its log).
	Message string `json:"message,omitempty"`
	// GPUs are the UUIDs of the GPUs the step's container was given, when
	// the node that runs it says (a process node's pod annotation).
	GPUs []string `json:"gpus,omitempty"`
}

// String is the SDK's line for a step.
func (s Step) String() string {
	return fmt.Sprintf("Step: %s, Status: %s, Devices: %s x %s", s.Name, s.Status, s.Device, s.DeviceCount)
}

// StepOfPod is the step of a pod whose container runs it: the pod's phase
// (Unknown without one), the container's device and GPUs, and, when the pod
// failed, the container's termination message.
func StepOfPod(p *corev1.Pod, name, container string) Step {
	s := Step{Name: name, Status: string(p.Status.Phase), Pod: p.Name}
	if s.Status == "" {
		s.Status = Unknown
	}
	s.Device, s.DeviceCount = StepDevice(p, container)
	s.GPUs = StepGPUs(p, container)
	if p.Status.Phase == corev1.PodFailed {
		s.Message = TerminationMessage(p, container)
	}
	return s
}

// Resource names and device kinds as the Kubeflow SDK names them.
const (
	GPUResource     = "nvidia.com/gpu"
	TPUResource     = "google.com/tpu"
	MIGPrefix       = "nvidia.com/mig-"
	EphemeralVolume = "ephemeral-storage"

	// Unknown is the device and count of a container without a known device
	// limit (and the status of a pod without a phase).
	Unknown = "Unknown"

	// EnvNumProcPerNode is torchrun's processes per node: a container's
	// device count when it is a number.
	EnvNumProcPerNode = "PET_NPROC_PER_NODE"
)

// Device is the device kind and count of a container, from its resource limits,
// as the Kubeflow SDK derives them: nvidia.com/gpu → "gpu", google.com/tpu →
// "tpu", nvidia.com/mig-<profile> → "mig-<profile>", else cpu → "cpu", in that
// order. Without any of them (or without limits) both are Unknown; the SDK raises
// an error when limits name none of them, the CLI says Unknown instead.
func Device(res corev1.ResourceRequirements) (device, count string) {
	limits := res.Limits
	if q, ok := limits[GPUResource]; ok {
		return "gpu", q.String()
	}
	if q, ok := limits[TPUResource]; ok {
		return "tpu", q.String()
	}
	// One MIG profile per container in practice; the first by name otherwise.
	mig := ""
	for name := range limits {
		if n := string(name); strings.HasPrefix(n, MIGPrefix) && (mig == "" || n < mig) {
			mig = n
		}
	}
	if mig != "" {
		q := limits[corev1.ResourceName(mig)]
		return strings.TrimPrefix(mig, "nvidia.com/"), q.String()
	}
	if q, ok := limits[corev1.ResourceCPU]; ok {
		return "cpu", q.String()
	}
	return Unknown, Unknown
}

// IsCount reports whether s is a whole number of devices (all digits).
func IsCount(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// TimesNodes multiplies a device count by the number of nodes when the count is
// a whole number; other counts (Unknown, "500m") are returned as they are.
func TimesNodes(count string, nodes int32) string {
	if !IsCount(count) || nodes <= 0 {
		return count
	}
	n, err := strconv.ParseInt(count, 10, 64)
	if err != nil {
		return count
	}
	return strconv.FormatInt(n*int64(nodes), 10)
}

// TerminationMessage is the termination message of a pod's container, trimmed.
func TerminationMessage(p *corev1.Pod, container string) string {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == container && cs.State.Terminated != nil {
			return strings.TrimSpace(cs.State.Terminated.Message)
		}
	}
	return ""
}

// StepGPUs are the UUIDs of the GPUs a step's container was given, as the
// process node that runs it names them on the pod (gpus.Annotation); none
// from other nodes, whose device plugins do not say.
func StepGPUs(p *corev1.Pod, container string) []string {
	v, ok := p.Annotations[gpus.Annotation]
	c := FindContainer(p, container)
	if !ok || c == nil {
		return nil
	}
	return gpus.ParseAnnotation(v)[c.Name]
}

// StepDevice is the device and count of a step's container: from its limits
// (Device), the count from a numeric PET_NPROC_PER_NODE (torchrun's processes
// per node); Unknown without the container.
func StepDevice(p *corev1.Pod, container string) (device, count string) {
	c := FindContainer(p, container)
	if c == nil {
		return Unknown, Unknown
	}
	device, count = Device(c.Resources)
	for _, e := range c.Env {
		if e.Name == EnvNumProcPerNode && IsCount(e.Value) {
			count = e.Value
		}
	}
	return device, count
}

// FindContainer is the pod's container of that name, or its only container.
func FindContainer(p *corev1.Pod, name string) *corev1.Container {
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Name == name {
			return &p.Spec.Containers[i]
		}
	}
	if len(p.Spec.Containers) == 1 {
		return &p.Spec.Containers[0]
	}
	return nil
}
