package deployed_e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/trainyard/trainyard/pkg/localcluster"
)

// buildImage builds the static Go command of testdata/<name> into a
// one-layer image, trainyard.local/e2e-<name>:1, imported into every node.
func buildImage(t *testing.T, ctx context.Context, name string) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, name)
	if err := localcluster.BuildStaticBinary(ctx, filepath.Join(repo, "test", "deployed_e2e"), "./testdata/"+name, bin); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	image := "trainyard.local/e2e-" + name + ":1"
	archive := filepath.Join(dir, name+".tar")
	if err := localcluster.WriteImageArchive(archive, image, []string{"/" + name}, localcluster.ImageFile{Path: "/" + name, Data: data, Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	if err := c.ImportImages(ctx, archive); err != nil {
		t.Fatal(err)
	}
	return image
}

// runPod runs a pod of one container (image, args, ServiceAccount sa) to its
// end and returns its phase and logs.
func runPod(t *testing.T, ctx context.Context, ns, name, sa, image string, args ...string) (corev1.PodPhase, string) {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever, ServiceAccountName: sa,
		TerminationGracePeriodSeconds: ptr.To[int64](1),
		Containers:                    []corev1.Container{{Name: name, Image: image, Args: args, ImagePullPolicy: corev1.PullNever}},
	}}
	return finishPod(t, ctx, pod)
}

// runPodWithVolume runs command in image with the PersistentVolumeClaim
// claim mounted at /opt/pytorch/output (seed 003's path), to its end.
func runPodWithVolume(t *testing.T, ctx context.Context, ns, name, image, claim string, command ...string) (corev1.PodPhase, string) {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: ptr.To[int64](1),
		Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
		Containers: []corev1.Container{{Name: name, Image: image, Command: command, ImagePullPolicy: corev1.PullNever,
			VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/opt/pytorch/output"}}}},
	}}
	return finishPod(t, ctx, pod)
}

// finishPod creates pod and waits for its end; it returns its phase and logs.
func finishPod(t *testing.T, ctx context.Context, pod *corev1.Pod) (corev1.PodPhase, string) {
	t.Helper()
	ns, name := pod.Namespace, pod.Name
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{}) })
	for {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			logs, err := kubectl(ctx, "logs", "-n", ns, name)
			if err != nil {
				t.Fatalf("%v: %s", err, logs)
			}
			return p.Status.Phase, logs
		}
		select {
		case <-ctx.Done():
			t.Fatalf("pod %s/%s did not finish: %v; status %+v", ns, name, ctx.Err(), p.Status)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// processUID returns the real user ID of a running container's first
// process, from the host's /proc: the container ID gives the task's PID in
// the node's containerd.
func processUID(ctx context.Context, pod *corev1.Pod, container string) (int, error) {
	node := -1
	for i := 0; i < nodes; i++ {
		if pod.Spec.NodeName == localcluster.ContainerNodeName(i) {
			node = i
		}
	}
	var id string
	for _, st := range pod.Status.ContainerStatuses {
		if st.Name == container {
			id = strings.TrimPrefix(st.ContainerID, "containerd://")
		}
	}
	if node < 0 || id == "" {
		return 0, fmt.Errorf("pod %s: container %s on node %q not found", pod.Name, container, pod.Spec.NodeName)
	}
	out, err := exec.CommandContext(ctx, "ctr", "--address", c.ContainerNodeSocket(node), "--namespace", "k8s.io",
		"tasks", "ls").CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("ctr tasks ls: %w: %s", err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || f[0] != id {
			continue
		}
		status, err := os.ReadFile(filepath.Join("/proc", f[1], "status"))
		if err != nil {
			return 0, err
		}
		for _, sl := range strings.Split(string(status), "\n") {
			if u, ok := strings.CutPrefix(sl, "Uid:"); ok {
				return strconv.Atoi(strings.Fields(u)[0])
			}
		}
	}
	return 0, fmt.Errorf("no task %s in node %d's containerd:\n%s", id, node, out)
}
