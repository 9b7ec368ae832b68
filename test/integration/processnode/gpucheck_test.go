package processnode

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/trainyard/trainyard/pkg/processnode"
)

// TestGPUCheck: the check test/gpucheck runs on a machine with GPUs, here
// with the fake nvidia-smi: discovery, the allocator (a second pod gets the
// other GPU), a GPU pod seeing only its GPU and a CPU pod seeing none, each in
// a sandbox; and a failing command fails the check.
func TestGPUCheck(t *testing.T) {
	dir := t.TempDir()
	smi := filepath.Join(dir, "nvidia-smi")
	if err := os.WriteFile(smi, []byte(fakeNvidiaSMI), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	check := processnode.GPUCheck{
		NvidiaSMI: smi, StateDir: filepath.Join(dir, "state"), Out: &out,
		GPUCommand: []string{"sh", "-c", `echo "gpu pod: $CUDA_VISIBLE_DEVICES $NVIDIA_VISIBLE_DEVICES $GREETING"`},
		CPUCommand: []string{"sh", "-c", `test -z "$CUDA_VISIBLE_DEVICES" && echo "cpu pod: [$CUDA_VISIBLE_DEVICES] $NVIDIA_VISIBLE_DEVICES"`},
		Env:        []corev1.EnvVar{{Name: "GREETING", Value: "hello"}},
	}
	if err := check.Run(ctx); err != nil {
		t.Fatalf("check: %v\n%s", err, out.String())
	}
	const a, b = "GPU-aaaaaaaa-0000-4000-8000-000000000000", "GPU-bbbbbbbb-0000-4000-8000-000000000000"
	for _, want := range []string{
		"node label nvidia.com/gpu.count=2",
		"pod gpu-check-gpu was given " + a,
		"a second pod asking for 1 GPU was given " + b,
		"[gpu-check-gpu] gpu pod: " + a + " " + a + " hello\n",
		"[gpu-check-cpu] cpu pod: [] void\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}

	out.Reset()
	check.GPUs, check.CPUCommand = 2, []string{"sh", "-c", "exit 3"}
	err := check.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "pod gpu-check-cpu: exit code 3") {
		t.Errorf("a failing CPU pod: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "pod gpu-check-gpu was given "+a+","+b) || !strings.Contains(out.String(), "none being free") {
		t.Errorf("two GPUs for the GPU pod, none for a second:\n%s", out.String())
	}
}
