package processnode

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/trainyard/trainyard/pkg/processnode/gpus"
)

var threeGPUs = []gpus.GPU{
	{Index: 0, UUID: "GPU-0", Name: "NVIDIA H200", MemoryMiB: 143771},
	{Index: 1, UUID: "GPU-1", Name: "NVIDIA H200", MemoryMiB: 143771},
	{Index: 2, UUID: "GPU-2", Name: "NVIDIA H200", MemoryMiB: 143771},
}

// gpuContainer asks for n GPUs (n < 0: none at all) the way pods do: limits,
// with requests defaulted to them.
func gpuContainer(name string, n int) corev1.Container {
	c := corev1.Container{Name: name}
	if n >= 0 {
		q := *resource.NewQuantity(int64(n), resource.DecimalSI)
		c.Resources.Limits = corev1.ResourceList{gpus.Resource: q}
		c.Resources.Requests = corev1.ResourceList{gpus.Resource: q}
	}
	return c
}

func gpuPod(uid string, containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pod-" + uid, UID: types.UID(uid)},
		Spec: corev1.PodSpec{Containers: containers}}
}

func TestPlanGPUs(t *testing.T) {
	free := []string{"GPU-0", "GPU-1", "GPU-2"}
	requestOnly := gpuContainer("node", -1)
	requestOnly.Resources.Requests = corev1.ResourceList{gpus.Resource: resource.MustParse("1")}
	cases := map[string]struct {
		pod     *corev1.Pod
		want    map[string][]string
		wantErr string
	}{
		"no GPUs asked":      {pod: gpuPod("a", gpuContainer("node", -1))},
		"zero GPUs asked":    {pod: gpuPod("a", gpuContainer("node", 0))},
		"one container, two": {pod: gpuPod("a", gpuContainer("node", 2)), want: map[string][]string{"node": {"GPU-0", "GPU-1"}}},
		"a request only":     {pod: gpuPod("a", requestOnly), want: map[string][]string{"node": {"GPU-0"}}},
		"containers get their own": {
			pod:  gpuPod("a", gpuContainer("a", 1), gpuContainer("cpu", -1), gpuContainer("b", 2)),
			want: map[string][]string{"a": {"GPU-0"}, "b": {"GPU-1", "GPU-2"}},
		},
		"init containers reuse the pod's": {
			pod: func() *corev1.Pod {
				p := gpuPod("a", gpuContainer("node", 1), gpuContainer("side", 1))
				p.Spec.InitContainers = []corev1.Container{gpuContainer("fetch", 1), gpuContainer("warm", 2)}
				return p
			}(),
			want: map[string][]string{"node": {"GPU-0"}, "side": {"GPU-1"}, "fetch": {"GPU-0"}, "warm": {"GPU-0", "GPU-1"}},
		},
		"an init container needs more than the containers": {
			pod: func() *corev1.Pod {
				p := gpuPod("a", gpuContainer("node", 1))
				p.Spec.InitContainers = []corev1.Container{gpuContainer("prep", 3)}
				return p
			}(),
			want: map[string][]string{"node": {"GPU-0"}, "prep": {"GPU-0", "GPU-1", "GPU-2"}},
		},
		"not enough": {
			pod:     gpuPod("a", gpuContainer("a", 2), gpuContainer("b", 2)),
			wantErr: "Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. Requested: 4, Available: 3, which is unexpected",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := planGPUs(tc.pod, free)
			if gotErr := errString(err); gotErr != tc.wantErr {
				t.Fatalf("error %q, want %q", gotErr, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("planGPUs (-want +got):\n%s", diff)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// A step on the allocator of a node with threeGPUs.
type gpuStep struct {
	allocate *corev1.Pod
	release  string
	retain   []string // UIDs
	restart  bool     // a new allocator from the same file, as a restarted agent makes
	want     map[string][]string
	wantErr  string
}

func TestGPUAllocator(t *testing.T) {
	cases := map[string]struct {
		steps    []gpuStep
		wantHeld map[string]podGPUs
	}{
		"pods never share a GPU": {
			steps: []gpuStep{
				{allocate: gpuPod("a", gpuContainer("node", 1)), want: map[string][]string{"node": {"GPU-0"}}},
				{allocate: gpuPod("b", gpuContainer("node", 1)), want: map[string][]string{"node": {"GPU-1"}}},
				{allocate: gpuPod("c", gpuContainer("node", 1)), want: map[string][]string{"node": {"GPU-2"}}},
				{allocate: gpuPod("d", gpuContainer("node", 1)),
					wantErr: "Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. Requested: 1, Available: 0, which is unexpected"},
			},
			wantHeld: map[string]podGPUs{
				"a": {Pod: "ns/pod-a", Containers: map[string][]string{"node": {"GPU-0"}}},
				"b": {Pod: "ns/pod-b", Containers: map[string][]string{"node": {"GPU-1"}}},
				"c": {Pod: "ns/pod-c", Containers: map[string][]string{"node": {"GPU-2"}}},
			},
		},
		"a pod asked again gets what it has": {
			steps: []gpuStep{
				{allocate: gpuPod("a", gpuContainer("node", 2)), want: map[string][]string{"node": {"GPU-0", "GPU-1"}}},
				{allocate: gpuPod("a", gpuContainer("node", 2)), want: map[string][]string{"node": {"GPU-0", "GPU-1"}}},
			},
			wantHeld: map[string]podGPUs{"a": {Pod: "ns/pod-a", Containers: map[string][]string{"node": {"GPU-0", "GPU-1"}}}},
		},
		"released GPUs go to the next pod": {
			steps: []gpuStep{
				{allocate: gpuPod("a", gpuContainer("node", 2)), want: map[string][]string{"node": {"GPU-0", "GPU-1"}}},
				{allocate: gpuPod("b", gpuContainer("node", 1)), want: map[string][]string{"node": {"GPU-2"}}},
				{release: "a"},
				{allocate: gpuPod("c", gpuContainer("node", 2)), want: map[string][]string{"node": {"GPU-0", "GPU-1"}}},
			},
			wantHeld: map[string]podGPUs{
				"b": {Pod: "ns/pod-b", Containers: map[string][]string{"node": {"GPU-2"}}},
				"c": {Pod: "ns/pod-c", Containers: map[string][]string{"node": {"GPU-0", "GPU-1"}}},
			},
		},
		"pods without GPUs hold nothing": {
			steps: []gpuStep{
				{allocate: gpuPod("a", gpuContainer("node", -1))},
				{allocate: gpuPod("b", gpuContainer("node", 3)), want: map[string][]string{"node": {"GPU-0", "GPU-1", "GPU-2"}}},
			},
			wantHeld: map[string]podGPUs{"b": {Pod: "ns/pod-b", Containers: map[string][]string{"node": {"GPU-0", "GPU-1", "GPU-2"}}}},
		},
		"a restarted agent gives a pod the GPUs it had, and no one else": {
			steps: []gpuStep{
				{allocate: gpuPod("a", gpuContainer("node", 1)), want: map[string][]string{"node": {"GPU-0"}}},
				{allocate: gpuPod("b", gpuContainer("node", 1)), want: map[string][]string{"node": {"GPU-1"}}},
				{release: "a"},
				{restart: true},
				// A new pod before b runs again: GPU-1 is still b's.
				{allocate: gpuPod("c", gpuContainer("node", 2)), want: map[string][]string{"node": {"GPU-0", "GPU-2"}}},
				{allocate: gpuPod("b", gpuContainer("node", 1)), want: map[string][]string{"node": {"GPU-1"}}},
			},
			wantHeld: map[string]podGPUs{
				"b": {Pod: "ns/pod-b", Containers: map[string][]string{"node": {"GPU-1"}}},
				"c": {Pod: "ns/pod-c", Containers: map[string][]string{"node": {"GPU-0", "GPU-2"}}},
			},
		},
		"once the pods are listed, those gone are dropped": {
			steps: []gpuStep{
				{allocate: gpuPod("a", gpuContainer("node", 1)), want: map[string][]string{"node": {"GPU-0"}}},
				{allocate: gpuPod("b", gpuContainer("node", 1)), want: map[string][]string{"node": {"GPU-1"}}},
				{restart: true},
				{retain: []string{"b"}},
				{restart: true},
				{allocate: gpuPod("c", gpuContainer("node", 2)), want: map[string][]string{"node": {"GPU-0", "GPU-2"}}},
			},
			wantHeld: map[string]podGPUs{
				"b": {Pod: "ns/pod-b", Containers: map[string][]string{"node": {"GPU-1"}}},
				"c": {Pod: "ns/pod-c", Containers: map[string][]string{"node": {"GPU-0", "GPU-2"}}},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), gpuStateFile)
			a := mustGPUAllocator(t, path, threeGPUs)
			for i, s := range tc.steps {
				switch {
				case s.allocate != nil:
					got, err := a.allocate(s.allocate)
					if gotErr := errString(err); gotErr != s.wantErr {
						t.Fatalf("step %d: allocate %s: error %q, want %q", i, s.allocate.UID, gotErr, s.wantErr)
					}
					if diff := cmp.Diff(s.want, got); diff != "" {
						t.Errorf("step %d: allocate %s (-want +got):\n%s", i, s.allocate.UID, diff)
					}
				case s.release != "":
					if err := a.release(s.release); err != nil {
						t.Fatalf("step %d: release: %v", i, err)
					}
				case s.retain != nil:
					keep := map[string]bool{}
					for _, uid := range s.retain {
						keep[uid] = true
					}
					if err := a.retain(func(uid string) bool { return keep[uid] }); err != nil {
						t.Fatalf("step %d: retain: %v", i, err)
					}
				case s.restart:
					a = mustGPUAllocator(t, path, threeGPUs)
				}
			}
			if diff := cmp.Diff(tc.wantHeld, a.held()); diff != "" {
				t.Errorf("held (-want +got):\n%s", diff)
			}
			// What is held is what the file says.
			if diff := cmp.Diff(tc.wantHeld, mustGPUAllocator(t, path, threeGPUs).held()); diff != "" {
				t.Errorf("held after a restart (-want +got):\n%s", diff)
			}
		})
	}
}

func mustGPUAllocator(t *testing.T, path string, known []gpus.GPU) *gpuAllocator {
	t.Helper()
	a, notes, err := newGPUAllocator(path, known)
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) > 0 {
		t.Fatalf("notes reading %s: %v", path, notes)
	}
	return a
}

// A recorded allotment that the node cannot honour any more is dropped, and
// said.
func TestGPUAllocatorDropsWhatCannotStand(t *testing.T) {
	path := filepath.Join(t.TempDir(), gpuStateFile)
	state := `{"pods": {
  "a": {"pod": "ns/a", "containers": {"node": ["GPU-0"]}},
  "b": {"pod": "ns/b", "containers": {"node": ["GPU-0", "GPU-1"]}},
  "c": {"pod": "ns/c", "containers": {"node": ["GPU-gone"]}},
  "d": {"pod": "ns/d", "containers": {"node": ["GPU-2"]}}
}}`
	if err := os.WriteFile(path, []byte(state), 0o644); err != nil {
		t.Fatal(err)
	}
	a, notes, err := newGPUAllocator(path, threeGPUs)
	if err != nil {
		t.Fatal(err)
	}
	wantNotes := []string{
		"dropped the GPUs of pod ns/b (b): GPU-0 is recorded for pod ns/a too",
		"dropped the GPUs of pod ns/c (c): GPU-gone is not a GPU of this node",
	}
	if diff := cmp.Diff(wantNotes, notes); diff != "" {
		t.Errorf("notes (-want +got):\n%s", diff)
	}
	want := map[string]podGPUs{
		"a": {Pod: "ns/a", Containers: map[string][]string{"node": {"GPU-0"}}},
		"d": {Pod: "ns/d", Containers: map[string][]string{"node": {"GPU-2"}}},
	}
	if diff := cmp.Diff(want, a.held()); diff != "" {
		t.Errorf("held (-want +got):\n%s", diff)
	}

	if err := os.WriteFile(path, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := newGPUAllocator(path, threeGPUs); err == nil {
		t.Error("a damaged state file was read without an error")
	}
}

func TestVisibleGPUEnv(t *testing.T) {
	cases := map[string]struct {
		env   []string
		uuids []string
		want  []string
	}{
		"no GPUs: none visible": {
			env:  []string{"PATH=/bin"},
			want: []string{"PATH=/bin", "CUDA_VISIBLE_DEVICES=", "NVIDIA_VISIBLE_DEVICES=void"},
		},
		"its GPUs by UUID": {
			env:   []string{"PATH=/bin"},
			uuids: []string{"GPU-a", "GPU-b"},
			want:  []string{"PATH=/bin", "CUDA_VISIBLE_DEVICES=GPU-a,GPU-b", "NVIDIA_VISIBLE_DEVICES=GPU-a,GPU-b"},
		},
		"the container's own values never widen them": {
			env:   []string{"CUDA_VISIBLE_DEVICES=0,1,2", "A=1", "NVIDIA_VISIBLE_DEVICES=all"},
			uuids: []string{"GPU-a"},
			want:  []string{"A=1", "CUDA_VISIBLE_DEVICES=GPU-a", "NVIDIA_VISIBLE_DEVICES=GPU-a"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, visibleGPUEnv(tc.env, tc.uuids)); diff != "" {
				t.Errorf("visibleGPUEnv (-want +got):\n%s", diff)
			}
		})
	}
}
