package processnode

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainyard/trainyard/pkg/processnode/gpus"
)

// testGPUProvider is a Provider with just what the GPU steps of a pod use.
func testGPUProvider(t *testing.T, known []gpus.GPU) *Provider {
	t.Helper()
	dir := t.TempDir()
	cfg := &Config{StateDir: dir, HostIP: "127.0.0.1", Logf: t.Logf}
	return &Provider{cfg: cfg, logf: cfg.Logf, pods: map[string]*podRun{},
		gpus: mustGPUAllocator(t, filepath.Join(dir, gpuStateFile), known)}
}

func (p *Provider) testRun(pod *corev1.Pod) *podRun {
	r := newPodRun(p, pod)
	p.pods[r.key] = r
	return r
}

// A pod's GPUs are named on it, and stay named when the API server's copy of
// the pod, without the annotation yet, updates its annotations.
func TestPodGPUAnnotation(t *testing.T) {
	p := testGPUProvider(t, threeGPUs[:2])
	pod := gpuPod("a", gpuContainer("node", 2))
	pod.Annotations = map[string]string{"keep": "me"}
	r := p.testRun(pod)
	if !r.allocateGPUs() {
		t.Fatalf("allocateGPUs failed: %s", r.snapshot().Status.Message)
	}
	want := map[string]string{"keep": "me", gpus.Annotation: "node=GPU-0,GPU-1"}
	if diff := cmp.Diff(want, r.snapshot().Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	if pod.Annotations[gpus.Annotation] != "" {
		t.Error("the pod given to the provider was changed")
	}

	update := pod.DeepCopy()
	update.Annotations = map[string]string{"new": "one"}
	if err := p.UpdatePod(context.Background(), update); err != nil {
		t.Fatal(err)
	}
	want = map[string]string{"new": "one", gpus.Annotation: "node=GPU-0,GPU-1"}
	if diff := cmp.Diff(want, r.snapshot().Annotations); diff != "" {
		t.Errorf("annotations after UpdatePod (-want +got):\n%s", diff)
	}
	if update.Annotations[gpus.Annotation] != "" {
		t.Error("the pod given to UpdatePod was changed")
	}

	cpu := p.testRun(gpuPod("cpu", gpuContainer("node", -1)))
	if !cpu.allocateGPUs() {
		t.Fatal("allocateGPUs failed for a pod without GPUs")
	}
	if _, ok := cpu.snapshot().Annotations[gpus.Annotation]; ok {
		t.Error("a pod without GPUs was annotated")
	}
}

// A pod asking for more GPUs than are free fails as the kubelet fails it.
func TestPodNotEnoughGPUs(t *testing.T) {
	p := testGPUProvider(t, threeGPUs[:2])
	r := p.testRun(gpuPod("a", gpuContainer("node", 3)))
	if r.allocateGPUs() {
		t.Fatal("allocateGPUs succeeded with 3 GPUs asked of 2")
	}
	st := r.snapshot().Status
	got := []string{string(st.Phase), st.Reason, st.Message}
	want := []string{"Failed", "UnexpectedAdmissionError",
		"Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. Requested: 3, Available: 2, which is unexpected"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("phase, reason, message (-want +got):\n%s", diff)
	}
}

// A pod's GPUs are freed when it ends, not when the agent stops it: the next
// agent runs it again on them.
func TestPodGPUsReleased(t *testing.T) {
	cases := map[string]struct {
		stop     stopReason // 0: the pod ended by itself
		wantHeld int
	}{
		"ended":             {wantHeld: 0},
		"deleted":           {stop: stopDeleted, wantHeld: 0},
		"past its deadline": {stop: stopDeadline, wantHeld: 0},
		"the agent stops":   {stop: stopShutdown, wantHeld: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := testGPUProvider(t, threeGPUs)
			r := p.testRun(gpuPod("a", gpuContainer("node", 1)))
			if !r.allocateGPUs() {
				t.Fatal("allocateGPUs failed")
			}
			if tc.stop != 0 {
				r.stop(tc.stop, 0)
			}
			r.releaseGPUs()
			if got := len(p.gpus.held()); got != tc.wantHeld {
				t.Errorf("%d pods hold GPUs, want %d", got, tc.wantHeld)
			}
		})
	}
}

// Once the pods are listed, the GPUs of those that are gone, over or being
// deleted are freed; those of pods listed to run or run by this agent stay.
func TestRetainGPUs(t *testing.T) {
	p := testGPUProvider(t, threeGPUs)
	mine := p.testRun(gpuPod("mine", gpuContainer("node", 1)))
	// What a previous agent recorded, and the pod this one runs.
	for uid, gpu := range map[string]string{"running": "GPU-0", "succeeded": "GPU-1", "deleting": "GPU-2", "gone": "GPU-3", mine.uid: "GPU-4"} {
		p.gpus.pods[uid] = podGPUs{Pod: "ns/pod-" + uid, Containers: map[string][]string{"node": {gpu}}}
	}
	listed := []*corev1.Pod{
		gpuPod("running"),
		func() *corev1.Pod { p := gpuPod("succeeded"); p.Status.Phase = corev1.PodSucceeded; return p }(),
		func() *corev1.Pod { p := gpuPod("deleting"); p.DeletionTimestamp = &metav1.Time{}; return p }(),
	}
	p.retainGPUs(listed)
	want := map[string]podGPUs{
		"mine":    {Pod: "ns/pod-mine", Containers: map[string][]string{"node": {"GPU-4"}}},
		"running": {Pod: "ns/pod-running", Containers: map[string][]string{"node": {"GPU-0"}}},
	}
	if diff := cmp.Diff(want, p.gpus.held()); diff != "" {
		t.Errorf("held (-want +got):\n%s", diff)
	}
}
