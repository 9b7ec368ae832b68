package processnode

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainyard/trainyard/pkg/processnode/gpus"
)

// fakeNvidiaSMI lists two GPUs that are not there (TestMain gives it to the
// agent); pods without GPU requests are not affected.
const fakeNvidiaSMI = `#!/bin/sh
cat <<'END'
0, GPU-aaaaaaaa-0000-4000-8000-000000000000, NVIDIA H200, 143771 MiB
1, GPU-bbbbbbbb-0000-4000-8000-000000000000, NVIDIA H200, 143771 MiB
END
`

func withGPUs(c corev1.Container, n int64) corev1.Container {
	c.Resources.Limits = corev1.ResourceList{gpus.Resource: *resource.NewQuantity(n, resource.DecimalSI)}
	return c
}

// With no scheduler to count GPUs, a pod bound to the node asking for more
// than it has fails as the kubelet fails it, and nothing of it runs.
func TestGPUPodAskingTooManyFails(t *testing.T) {
	ctx := ctxT(t, time.Minute)
	const ns = "gpu-too-many"
	createNamespace(t, ctx, ns)
	pod := shPod(ns, "three", "echo ran", corev1.RestartPolicyNever)
	pod.Spec.Containers[0] = withGPUs(pod.Spec.Containers[0], 3)
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := waitPod(t, ctx, ns, "three", "Failed", finished)
	got := []string{string(p.Status.Phase), p.Status.Reason, p.Status.Message}
	want := []string{"Failed", "UnexpectedAdmissionError",
		"Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. Requested: 3, Available: 2, which is unexpected"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("phase, reason, message (-want +got):\n%s", diff)
	}
	if _, ok := p.Annotations[gpus.Annotation]; ok {
		t.Errorf("a pod that got no GPUs is annotated %s=%q", gpus.Annotation, p.Annotations[gpus.Annotation])
	}
}

// An init container may use the pod's GPUs before its containers do: the pod
// holds max(init, sum of containers), here 2, and each sees its own share.
func TestGPUInitContainerReusesThePods(t *testing.T) {
	ctx := ctxT(t, time.Minute)
	const ns = "gpu-init"
	createNamespace(t, ctx, ns)
	pod := shPod(ns, "init", `echo "main CUDA=[$CUDA_VISIBLE_DEVICES]"`, corev1.RestartPolicyNever)
	pod.Spec.Containers[0] = withGPUs(pod.Spec.Containers[0], 1)
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "cpu", Image: "ignored",
		Command: []string{"sh", "-c", `echo "cpu CUDA=[$CUDA_VISIBLE_DEVICES] NVIDIA=[$NVIDIA_VISIBLE_DEVICES]"`}})
	pod.Spec.InitContainers = []corev1.Container{withGPUs(corev1.Container{Name: "prep", Image: "ignored",
		Command: []string{"sh", "-c", `echo "prep CUDA=[$CUDA_VISIBLE_DEVICES]"`}}, 2)}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := waitPod(t, ctx, ns, "init", "finished", finished)
	if p.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("phase %s (%s: %s), want Succeeded", p.Status.Phase, p.Status.Reason, p.Status.Message)
	}
	const a, b = "GPU-aaaaaaaa-0000-4000-8000-000000000000", "GPU-bbbbbbbb-0000-4000-8000-000000000000"
	for container, want := range map[string]string{
		"prep": "prep CUDA=[" + a + "," + b + "]",
		"c":    "main CUDA=[" + a + "]",
		"cpu":  "cpu CUDA=[] NVIDIA=[void]",
	} {
		if got := strings.TrimSpace(kubeletLogs(t, ns, "init", container, "")); got != want {
			t.Errorf("%s printed %q, want %q", container, got, want)
		}
	}
	// The annotation goes with a status update; the last one may be the
	// Succeeded one, so wait for it rather than read it once.
	waitPod(t, ctx, ns, "init", "annotated", func(p *corev1.Pod) bool {
		return p.Annotations[gpus.Annotation] == "c="+a+";prep="+a+","+b
	})
}
