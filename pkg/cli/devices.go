package cli

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Resource names and device kinds as the Kubeflow SDK names them.
const (
	GPUResource     = "nvidia.com/gpu"
	TPUResource     = "google.com/tpu"
	MIGPrefix       = "nvidia.com/mig-"
	EphemeralVolume = "ephemeral-storage"

	// Unknown is the device and count of a container without a known device limit.
	Unknown = "Unknown"
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

// isCount reports whether s is a whole number of devices (all digits).
func isCount(s string) bool {
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

// timesNodes multiplies a device count by the number of nodes when the count is
// a whole number; other counts (Unknown, "500m") are returned as they are.
func timesNodes(count string, nodes int32) string {
	if !isCount(count) || nodes <= 0 {
		return count
	}
	n, err := strconv.ParseInt(count, 10, 64)
	if err != nil {
		return count
	}
	return strconv.FormatInt(n*int64(nodes), 10)
}
