package runtime_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/trainyard/trainyard/pkg/runtime"
	rtt "github.com/trainyard/trainyard/test/util/rtt"
)

var list = rtt.ResourceList

func TestMergeResources(t *testing.T) {
	cases := map[string]struct {
		base, override corev1.ResourceRequirements
		want           corev1.ResourceRequirements
	}{
		"both empty": {},
		"empty override keeps the base": {
			base: corev1.ResourceRequirements{Requests: list("cpu", "1"), Limits: list("cpu", "2")},
			want: corev1.ResourceRequirements{Requests: list("cpu", "1"), Limits: list("cpu", "2")},
		},
		"empty base takes the override": {
			override: corev1.ResourceRequirements{Requests: list("cpu", "1", "memory", "1Gi"), Limits: list("cpu", "2", "memory", "1Gi")},
			want:     corev1.ResourceRequirements{Requests: list("cpu", "1", "memory", "1Gi"), Limits: list("cpu", "2", "memory", "1Gi")},
		},
		"override wins per key, other keys of the base stay": {
			base:     corev1.ResourceRequirements{Requests: list("cpu", "1", "memory", "4Gi"), Limits: list("cpu", "2", "memory", "4Gi")},
			override: corev1.ResourceRequirements{Requests: list("cpu", "3"), Limits: list("memory", "8Gi")},
			want:     corev1.ResourceRequirements{Requests: list("cpu", "3", "memory", "4Gi"), Limits: list("cpu", "2", "memory", "8Gi")},
		},
		"a limit without a request gets a request equal to the limit": {
			override: rtt.Limits("nvidia.com/gpu", "4", "memory", "16Gi"),
			want: corev1.ResourceRequirements{
				Requests: list("nvidia.com/gpu", "4", "memory", "16Gi"),
				Limits:   list("nvidia.com/gpu", "4", "memory", "16Gi"),
			},
		},
		"the base's limit without a request gets one too": {
			base:     rtt.Limits("nvidia.com/gpu", "4"),
			override: rtt.Requests("memory", "16Gi"),
			want: corev1.ResourceRequirements{
				Requests: list("nvidia.com/gpu", "4", "memory", "16Gi"),
				Limits:   list("nvidia.com/gpu", "4"),
			},
		},
		"an explicit request lower than the limit is kept": {
			base:     rtt.Requests("cpu", "500m"),
			override: rtt.Limits("cpu", "2"),
			want:     corev1.ResourceRequirements{Requests: list("cpu", "500m"), Limits: list("cpu", "2")},
		},
		"claims merge by name, override wins, new ones appended": {
			base: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{
				{Name: "a", Request: "r1"}, {Name: "b", Request: "r1"},
			}},
			override: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{
				{Name: "b", Request: "r2"}, {Name: "c"},
			}},
			want: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{
				{Name: "a", Request: "r1"}, {Name: "b", Request: "r2"}, {Name: "c"},
			}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			base, override := tc.base.DeepCopy(), tc.override.DeepCopy()
			got := runtime.MergeResources(*base, *override)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("MergeResources (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.base, *base); diff != "" {
				t.Errorf("MergeResources mutated base (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(tc.override, *override); diff != "" {
				t.Errorf("MergeResources mutated override (-before +after):\n%s", diff)
			}
			// The result shares nothing with its inputs.
			for k := range got.Requests {
				got.Requests[k] = list("cpu", "999")["cpu"]
			}
			for k := range got.Limits {
				got.Limits[k] = list("cpu", "999")["cpu"]
			}
			for k := range got.Claims {
				got.Claims[k].Name = "changed"
			}
			if diff := cmp.Diff(tc.base, *base); diff != "" {
				t.Errorf("result aliases base (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(tc.override, *override); diff != "" {
				t.Errorf("result aliases override (-before +after):\n%s", diff)
			}
		})
	}
}
