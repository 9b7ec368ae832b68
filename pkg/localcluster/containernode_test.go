package localcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/trainyard/trainyard/pkg/processnode"
	"github.com/trainyard/trainyard/test/prereq"
)

// TestContainerNode brings up a cluster with two container nodes (real
// kubelets, each on its own containerd) beside a kwok node and a process
// node, imports an image built here without a container engine (a static Go
// binary in an OCI archive) into node 0's containerd, runs it as a pod and
// reads its output with kubectl logs (API server → kubelet → containerd's log
// file); then checks the nodes' network, DNS and storage (checkPodNetwork),
// that the kwok and process nodes keep working beside them (checkMixedNodes),
// that a LAN neighbour reaches nothing of the cluster (checkLANNeighbour),
// and that Down leaves nothing behind and puts IP forwarding back as it was. It builds the kubelet, kube-proxy,
// CoreDNS and the provisioner and installs the nodes' Debian packages first,
// and fails, with the fix, when they are still missing.
func TestContainerNode(t *testing.T) {
	o := Options{StateDir: t.TempDir(), ContainerNodes: 2, CPUNodes: 1, ProcessNodes: 1, Runtimes: []string{}}
	if err := o.defaults(); err != nil {
		t.Fatal(err)
	}
	o.Runtimes = []string{filepath.Join(o.RepoDir, mixedRuntime)}
	base := o
	base.ContainerNodes = 0
	missing, err := MissingBinaries(base)
	prereq.Requiref(t, err == nil && len(missing) == 0, "local cluster binaries missing (build them with `make cluster-tools`): %v %v", missing, err)
	if os.Geteuid() != 0 {
		t.Fatal("container nodes need root")
	}
	for _, step := range [][]string{
		{filepath.Join(o.RepoDir, "test", "tools", "build.sh"), o.BinDir, Kubelet, KubeProxy, CoreDNS, Provisioner},
		{filepath.Join(o.RepoDir, ContainerNodePackagesScript)},
	} {
		cmd := exec.Command(step[0], step[1:]...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(step, " "), err, out)
		}
	}
	if errs := ContainerNodePrerequisites(); len(errs) > 0 {
		t.Fatalf("container nodes cannot run here: %v", errs)
	}
	if testing.Verbose() {
		o.Progress = testWriter{t}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// IP forwarding off before Up (as on a host that never forwarded): Down
	// must put it back. The test holds the cluster lock (RULES.md): no other
	// cluster with container nodes runs meanwhile.
	const ipForward = "/proc/sys/net/ipv4/ip_forward"
	before, err := os.ReadFile(ipForward)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.WriteFile(ipForward, before, 0o644) })
	if err := os.WriteFile(ipForward, []byte("0"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, down := upForTest(ctx, t, o)
	if b, _ := os.ReadFile(ipForward); strings.TrimSpace(string(b)) != "1" {
		t.Errorf("ip_forward %q after Up, want 1", b)
	}

	// The image: testdata/hello, static, packed as an OCI archive.
	dir := t.TempDir()
	bin := filepath.Join(dir, "hello")
	if err := BuildStaticBinary(ctx, filepath.Join(o.RepoDir, "pkg", "localcluster"), "./testdata/hello", bin); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	const image = "registry.trainyard.local/hello:1"
	archive := filepath.Join(dir, "hello.tar")
	if err := WriteImageArchive(archive, image, []string{"/hello"}, ImageFile{Path: "/hello", Data: data, Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	if err := ImportImage(ctx, c.ContainerNodeSocket(0), archive); err != nil {
		t.Fatal(err)
	}

	pod := &corev1.Pod{}
	pod.Name, pod.Namespace = "hello", "default"
	pod.Spec = corev1.PodSpec{
		NodeName:      ContainerNodeName(0),
		RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{{Name: "hello", Image: image, ImagePullPolicy: corev1.PullNever,
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}}}},
		TerminationGracePeriodSeconds: ptr.To[int64](1),
	}
	if err := c.client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	err = c.poll(ctx, "pod hello to succeed", func() (bool, string, error) {
		if err := c.client.Get(ctx, types.NamespacedName{Namespace: "default", Name: "hello"}, pod); err != nil {
			return false, "", err
		}
		if pod.Status.Phase == corev1.PodFailed {
			return false, "", fmt.Errorf("pod failed: %+v", pod.Status)
		}
		return pod.Status.Phase == corev1.PodSucceeded, fmt.Sprintf("phase %s: %+v", pod.Status.Phase, pod.Status.ContainerStatuses), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cs := pod.Status.ContainerStatuses
	if len(cs) != 1 || !strings.HasPrefix(cs[0].ContainerID, "containerd://") || cs[0].State.Terminated == nil || cs[0].State.Terminated.ExitCode != 0 {
		t.Fatalf("container status: %+v", cs)
	}
	if !strings.HasPrefix(pod.Status.PodIP, "10.253.0.") {
		t.Errorf("pod IP %q, want one of the node's 10.253.0.0/24", pod.Status.PodIP)
	}
	out, err := exec.CommandContext(ctx, filepath.Join(o.BinDir, "kubectl"), "--kubeconfig", c.Kubeconfig(), "logs", "-n", "default", "hello").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl logs: %v: %s", err, out)
	}
	t.Logf("kubectl logs hello: %s", strings.TrimSpace(string(out)))
	// Its own PID namespace, host name and root file system (the image's one
	// file, and what the runtime mounts: no /usr of the host).
	if want := "hello from a container: hostname=hello pid=1 "; !strings.Contains(string(out), want) {
		t.Errorf("kubectl logs: %q, want it to contain %q", out, want)
	}
	if strings.Contains(string(out), "usr") {
		t.Errorf("kubectl logs: %q: the container sees the host's root", out)
	}

	podIP, clusterIP := checkPodNetwork(ctx, t, c, dir)
	checkMixedNodes(ctx, t, c)
	checkLANNeighbour(ctx, t, c, podIP, clusterIP)

	if err := down(); err != nil {
		t.Fatalf("Down: %v", err)
	}
	// Down leaves no container, bridge, cgroup or iptables chain behind.
	for i := 0; i < o.ContainerNodes; i++ {
		if linkExists(containerBridge(o.StateDir, i)) {
			t.Errorf("bridge %s still exists after Down", containerBridge(o.StateDir, i))
		}
		for _, m := range cgroupV1Mounts() {
			if _, err := os.Stat(filepath.Join(m, containerCgroupRoot(o.StateDir, i))); err == nil {
				t.Errorf("cgroup %s still exists after Down", filepath.Join(m, containerCgroupRoot(o.StateDir, i)))
			}
		}
	}
	if linkExists(processnode.DefaultBridge(o.StateDir)) {
		t.Errorf("the process nodes' bridge %s still exists after Down", processnode.DefaultBridge(o.StateDir))
	}
	for _, table := range []string{"raw", "filter", "nat"} {
		if iptables("-t", table, "-n", "-L", networkChain(o.StateDir)) == nil {
			t.Errorf("iptables chain %s of table %s still exists after Down", networkChain(o.StateDir), table)
		}
	}
	if linkExists(hostLink(o.StateDir)) {
		t.Errorf("the node address's interface %s still exists after Down", hostLink(o.StateDir))
	}
	if b, _ := os.ReadFile(ipForward); strings.TrimSpace(string(b)) != "0" {
		t.Errorf("ip_forward %q after Down, want 0 as before Up", b)
	}
	for _, m := range mountInfo() {
		if strings.HasPrefix(m.point, o.StateDir+"/") {
			t.Errorf("mount %s (%s) still there after Down", m.point, m.fstype)
		}
	}
}
