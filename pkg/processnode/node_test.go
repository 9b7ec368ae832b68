package processnode

import (
	"runtime"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
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
			n := nodeSpec(Config{NodeName: "n", HostIP: "127.0.0.1", CPUOvercommit: tc.overcommit}, 10250)
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
