package processnode

import (
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/trainyard/trainyard/pkg/processnode/gpus"
)

// The Node advertises the host's CPUs times the overcommit factor, capacity
// and allocatable alike.
func TestNodeSpecCPUOvercommit(t *testing.T) {
	cases := map[string]struct {
		overcommit float64
		wantMilli  int64
	}{
		"the real count":     {1, int64(runtime.NumCPU()) * 1000},
		"the default factor": {DefaultCPUOvercommit, int64(runtime.NumCPU()) * 4000},
		"a fraction":         {1.5, int64(runtime.NumCPU()) * 1500},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			n := nodeSpec(Config{NodeName: "n", HostIP: "127.0.0.1", CPUOvercommit: tc.overcommit}, 10250, nil)
			want := resource.NewMilliQuantity(tc.wantMilli, resource.DecimalSI)
			if got := n.Status.Capacity.Cpu(); got.Cmp(*want) != 0 {
				t.Errorf("capacity cpu = %s, want %s", got, want)
			}
			if got := n.Status.Allocatable.Cpu(); got.Cmp(*want) != 0 {
				t.Errorf("allocatable cpu = %s, want %s", got, want)
			}
		})
	}
}

// GPUs are nvidia.com/gpu, capacity and allocatable alike, with GFD's labels;
// a Node without GPUs has neither.
func TestNodeSpecGPUs(t *testing.T) {
	two := []gpus.GPU{{Index: 0, UUID: "GPU-a", Name: "NVIDIA H200", MemoryMiB: 143771}, {Index: 1, UUID: "GPU-b", Name: "NVIDIA H200", MemoryMiB: 143771}}
	cases := map[string]struct {
		gpus       []gpus.GPU
		wantCount  string
		wantLabels map[string]string
	}{
		"none": {wantLabels: map[string]string{}},
		"two H200": {gpus: two, wantCount: "2",
			wantLabels: map[string]string{gpus.LabelProduct: "NVIDIA-H200", gpus.LabelMemory: "143771", gpus.LabelCount: "2"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			n := nodeSpec(Config{NodeName: "n", HostIP: "127.0.0.1", CPUOvercommit: 1}, 10250, tc.gpus)
			for what, list := range map[string]corev1.ResourceList{"capacity": n.Status.Capacity, "allocatable": n.Status.Allocatable} {
				q, ok := list[gpus.Resource]
				got := ""
				if ok {
					got = q.String()
				}
				if got != tc.wantCount {
					t.Errorf("%s %s = %q, want %q", what, gpus.Resource, got, tc.wantCount)
				}
			}
			gotLabels := map[string]string{}
			for k, v := range n.Labels {
				if strings.HasPrefix(k, "nvidia.com/") {
					gotLabels[k] = v
				}
			}
			if diff := cmp.Diff(tc.wantLabels, gotLabels); diff != "" {
				t.Errorf("GPU labels (-want +got):\n%s", diff)
			}
		})
	}
}
