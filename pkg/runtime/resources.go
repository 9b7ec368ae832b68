package runtime

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// MergeResources overlays override on base key by key (override wins), then gives every
// resource that has a limit but no request a request equal to the limit. That is
// what the API server would do for the pod anyway; doing it in the template keeps
// GPU requests visible to quota systems such as Kueue, which read the template.
func MergeResources(base, override corev1.ResourceRequirements) corev1.ResourceRequirements {
	out := *base.DeepCopy()
	if len(override.Requests) > 0 && out.Requests == nil {
		out.Requests = corev1.ResourceList{}
	}
	for k, v := range override.Requests {
		out.Requests[k] = v.DeepCopy()
	}
	if len(override.Limits) > 0 && out.Limits == nil {
		out.Limits = corev1.ResourceList{}
	}
	for k, v := range override.Limits {
		out.Limits[k] = v.DeepCopy()
	}
	for _, c := range override.Claims {
		replaced := false
		for i := range out.Claims {
			if out.Claims[i].Name == c.Name {
				out.Claims[i] = c
				replaced = true
			}
		}
		if !replaced {
			out.Claims = append(out.Claims, c)
		}
	}
	for k, v := range out.Limits {
		if _, ok := out.Requests[k]; !ok {
			if out.Requests == nil {
				out.Requests = corev1.ResourceList{}
			}
			out.Requests[k] = v.DeepCopy()
		}
	}
	return out
}

// GPUs counts the GPUs of a container: resources whose name ends in "gpu" (such as
// nvidia.com/gpu or amd.com/gpu), from limits, else requests.
func GPUs(res corev1.ResourceRequirements) int64 {
	var n int64
	for _, list := range []corev1.ResourceList{res.Limits, res.Requests} {
		for name, q := range list {
			if strings.HasSuffix(string(name), "gpu") {
				n += q.Value()
			}
		}
		if n > 0 {
			return n
		}
	}
	return 0
}
