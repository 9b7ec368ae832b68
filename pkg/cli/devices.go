package cli

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/trainyard/trainyard/pkg/cli/view"
)

// Resource names and device kinds as the Kubeflow SDK names them (view's).
const (
	GPUResource     = view.GPUResource
	TPUResource     = view.TPUResource
	MIGPrefix       = view.MIGPrefix
	EphemeralVolume = view.EphemeralVolume

	// Unknown is the device and count of a container without a known device limit.
	Unknown = view.Unknown
)

// Device is the device kind and count of a container, from its resource
// limits, as the Kubeflow SDK derives them (view.Device).
func Device(res corev1.ResourceRequirements) (device, count string) { return view.Device(res) }

// Step is one pod of a job (view.Step).
type Step = view.Step

// ProgressBar draws a reported progress (view.ProgressBar).
var ProgressBar = view.ProgressBar
