package processnode

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/trainyard/trainyard/pkg/processnode"
)

// The node's policy: it runs pods as root on its host, so by default it is
// tainted and refuses the pods that do not tolerate the taint, and it honours
// hostPath volumes only under its allowed roots (this suite's agent:
// hostPathRoot).

// hostPathDir is a new directory under hostPathRoot.
func hostPathDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp(hostPathRoot, "it-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// refused waits for the pod to fail with reason, and checks that its
// message says what and that its command never ran (it would have created
// marker on the host: a pod's absolute paths are the host's).
func refused(t *testing.T, ns, name, reason, marker string, says ...string) {
	t.Helper()
	ctx := ctxT(t, time.Minute)
	p := waitPod(t, ctx, ns, name, "finished", finished)
	if p.Status.Phase != corev1.PodFailed || p.Status.Reason != reason {
		t.Errorf("%s: phase %s, reason %q, message %q; want Failed, %s", name, p.Status.Phase, p.Status.Reason, p.Status.Message, reason)
	}
	for _, s := range says {
		if !strings.Contains(p.Status.Message, s) {
			t.Errorf("%s: message %q does not say %q", name, p.Status.Message, s)
		}
	}
	if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Terminated == nil ||
		p.Status.ContainerStatuses[0].State.Terminated.Reason != reason {
		t.Errorf("%s: container statuses %+v", name, p.Status.ContainerStatuses)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("%s: its command ran (%s exists)", name, marker)
	}
}

// TestNodeTaintedByDefault: with Config.Untainted unset the Node carries
// the process node's NoSchedule taint.
func TestNodeTaintedByDefault(t *testing.T) {
	ctx := ctxT(t, 30*time.Second)
	n, err := cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := corev1.Taint{Key: "trainyard.io/process-node", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	found := false
	for _, tt := range n.Spec.Taints {
		found = found || tt.Key == want.Key && tt.Value == want.Value && tt.Effect == want.Effect
	}
	if !found {
		t.Errorf("node taints %v, want %v among them", n.Spec.Taints, want)
	}
}

// TestPodNotToleratingTaintRefused: a pod bound to the node (the scheduler
// skipped: spec.nodeName) without the toleration fails at once with
// ProcessNodeTaintNotTolerated, and so does a DaemonSet's pod, which
// tolerates the node.kubernetes.io taints as the DaemonSet controller adds
// them, not this one.
func TestPodNotToleratingTaintRefused(t *testing.T) {
	ctx := ctxT(t, time.Minute)
	const ns = "taint-refused"
	createNamespace(t, ctx, ns)
	markers := hostPathDir(t)
	plain := shPod(ns, "plain", "touch "+filepath.Join(markers, "plain"), corev1.RestartPolicyNever)
	plain.Spec.Tolerations = nil
	ds := shPod(ns, "daemon", "touch "+filepath.Join(markers, "daemon"), corev1.RestartPolicyAlways)
	ds.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "0b1e5a1e-0000-4000-8000-000000000001", Controller: ptr.To(true)}}
	ds.Spec.Tolerations = nil
	for _, k := range []string{"not-ready", "unreachable"} {
		ds.Spec.Tolerations = append(ds.Spec.Tolerations, corev1.Toleration{Key: "node.kubernetes.io/" + k, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute})
	}
	for _, k := range []string{"disk-pressure", "memory-pressure", "pid-pressure", "unschedulable"} {
		ds.Spec.Tolerations = append(ds.Spec.Tolerations, corev1.Toleration{Key: "node.kubernetes.io/" + k, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	}
	// A toleration of the right key with another value does not tolerate it.
	wrong := shPod(ns, "wrong-value", "touch "+filepath.Join(markers, "wrong-value"), corev1.RestartPolicyNever)
	wrong.Spec.Tolerations = []corev1.Toleration{{Key: processnode.ProcessNodeTaint.Key, Operator: corev1.TolerationOpEqual, Value: "false"}}
	// Issue #40: nor does a toleration of every taint (a DaemonSet of a log
	// shipper, say), unless the node is started to accept it.
	all := shPod(ns, "wildcard", "touch "+filepath.Join(markers, "wildcard"), corev1.RestartPolicyAlways)
	all.OwnerReferences = ds.OwnerReferences
	all.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	for _, p := range []*corev1.Pod{plain, ds, wrong, all} {
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"plain", "daemon", "wrong-value"} {
		refused(t, ns, name, "ProcessNodeTaintNotTolerated", filepath.Join(markers, name),
			"trainyard.io/process-node=true:NoSchedule", "runs pods as root", "spec.tolerations")
	}
	refused(t, ns, "wildcard", "ProcessNodeTaintNotTolerated", filepath.Join(markers, "wildcard"),
		"trainyard.io/process-node=true:NoSchedule", "toleration of every taint", "--accept-wildcard-tolerations")
}

// TestTolerationsRun: pods that tolerate the taint run: by key (Exists),
// by key and value (Equal), and by key beside a toleration of every taint.
func TestTolerationsRun(t *testing.T) {
	ctx := ctxT(t, time.Minute)
	const ns = "taint-tolerated"
	createNamespace(t, ctx, ns)
	cases := map[string][]corev1.Toleration{
		"exists":        {processNodeToleration},
		"equal":         {{Key: processnode.ProcessNodeTaint.Key, Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		"all-and-exact": {{Operator: corev1.TolerationOpExists}, processNodeToleration},
	}
	for name, tols := range cases {
		p := shPod(ns, name, "echo ran", corev1.RestartPolicyNever)
		p.Spec.Tolerations = tols
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for name := range cases {
		p := waitPod(t, ctx, ns, name, "finished", finished)
		if p.Status.Phase != corev1.PodSucceeded || kubeletLogs(t, ns, name, "c", "") != "ran\n" {
			t.Errorf("%s: phase %s, reason %q, message %q", name, p.Status.Phase, p.Status.Reason, p.Status.Message)
		}
	}
}

// TestHostPathRoots: a hostPath under the allowed root is mounted (created
// when its type says so); one outside it fails with HostPathNotAllowed and
// nothing is created, whether it is outside plainly or through a symlink
// under the root.
func TestHostPathRoots(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	const ns = "hostpath"
	createNamespace(t, ctx, ns)
	inside := hostPathDir(t)
	outside, err := os.MkdirTemp("", "trainyard-it-outside-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(outside) })
	if err := os.Symlink(outside, filepath.Join(inside, "link")); err != nil {
		t.Fatal(err)
	}
	pod := func(name, path string) *corev1.Pod {
		p := shPod(ns, name, "echo from-"+name+" > /data/out && touch "+filepath.Join(inside, "ran-"+name), corev1.RestartPolicyNever)
		p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
			Path: path, Type: ptr.To(corev1.HostPathDirectoryOrCreate)}}}}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		return p
	}
	// (A path with ".." the API server refuses itself.)
	escapes := map[string]string{
		"plain":   filepath.Join(outside, "new"),
		"symlink": filepath.Join(inside, "link", "new"),
		"etc":     "/etc",
	}
	for name, path := range escapes {
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod(name, path), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ok := pod("inside", filepath.Join(inside, "made", "here"))
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, ok, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, path := range escapes {
		refused(t, ns, name, "HostPathNotAllowed", filepath.Join(inside, "ran-"+name), "hostPath volume data", path, "trainyard-node --allowed-host-paths")
	}
	if _, err := os.Stat(filepath.Join(outside, "new")); err == nil {
		t.Errorf("%s/new was created on the host", outside)
	}
	p := waitPod(t, ctx, ns, "inside", "finished", finished)
	if p.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("inside: phase %s, reason %q, message %q", p.Status.Phase, p.Status.Reason, p.Status.Message)
	}
	if b, err := os.ReadFile(filepath.Join(inside, "made", "here", "out")); err != nil || string(b) != "from-inside\n" {
		t.Errorf("the pod's file on the host: %q, %v", b, err)
	}
}
