package localcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// mixedRuntime is the one runtime TestContainerNode installs: the TrainJob of
// checkMixedNodes runs on it.
const mixedRuntime = "runtimes/torch-distributed.yaml"

// checkMixedNodes checks that kwok and process nodes keep working beside
// container nodes (#26): every node is Ready; a pod bound to the kwok node
// is Running (kwok fakes it); a pod bound to the process node runs on the
// host, reaches the manager's status server at the URL the manager gives
// trainers (the node IP with container nodes, not the process nodes' bridge
// address) with the cluster CA, succeeds and has its log read through the
// API server; and a TrainJob pinned to the process node reports progress
// there the way Kubeflow's trainers do (the projected token and the CA of
// the TrainJobStatus plugin), which lands in status.trainerStatus.
func checkMixedNodes(ctx context.Context, t *testing.T, c *Cluster) {
	t.Helper()
	var nodes corev1.NodeList
	if err := c.client.List(ctx, &nodes); err != nil {
		t.Fatal(err)
	}
	ready := map[string]bool{}
	for _, n := range nodes.Items {
		ready[n.Name] = false
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ready[n.Name] = true
			}
		}
	}
	want := map[string]bool{"kwok-cpu-0": true, ProcessNodeName(0): true, ContainerNodeName(0): true, ContainerNodeName(1): true}
	if diff := cmp.Diff(want, ready); diff != "" {
		t.Errorf("nodes and whether they are Ready (-want +got):\n%s", diff)
	}

	const ns = "default"
	kwokPod := &corev1.Pod{}
	kwokPod.Name, kwokPod.Namespace = "on-kwok", ns
	kwokPod.Spec = corev1.PodSpec{NodeName: "kwok-cpu-0", Tolerations: []corev1.Toleration{KwokToleration},
		Containers: []corev1.Container{{Name: "fake", Image: "registry.trainyard.local/none:1"}}}
	if err := c.client.Create(ctx, kwokPod); err != nil {
		t.Fatal(err)
	}
	if err := c.poll(ctx, "pod on-kwok to run", func() (bool, string, error) {
		err := c.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: kwokPod.Name}, kwokPod)
		return err == nil && kwokPod.Status.Phase == corev1.PodRunning, fmt.Sprintf("%v phase %s", err, kwokPod.Status.Phase), nil
	}); err != nil {
		t.Error(err)
	}

	// The process node runs host programs: sh and curl of this machine, with
	// the cluster CA's file on the host.
	url := fmt.Sprintf("https://%s:%d/", c.statusHost(), c.ports.ManagerStatus)
	if !strings.HasPrefix(url, "https://"+c.nodeIP+":") {
		t.Errorf("the manager's status server URL %s is not at the node IP %s", url, c.nodeIP)
	}
	proc := &corev1.Pod{}
	proc.Name, proc.Namespace = "on-process-node", ns
	proc.Spec = corev1.PodSpec{
		NodeName:      ProcessNodeName(0),
		RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{{Name: "probe", Image: "registry.trainyard.local/none:1",
			Command: []string{"sh", "-c", `echo "hello from $(hostname)" && ` +
				`curl -sS --max-time 20 --cacert "$1" -o /dev/null -w 'status server answered %{http_code}\n' "$2"`,
				"probe", c.pki.caCert(), url}}},
		TerminationGracePeriodSeconds: ptr.To[int64](1),
	}
	if err := c.client.Create(ctx, proc); err != nil {
		t.Fatal(err)
	}
	err := c.poll(ctx, "pod on-process-node to finish", func() (bool, string, error) {
		err := c.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: proc.Name}, proc)
		done := err == nil && (proc.Status.Phase == corev1.PodSucceeded || proc.Status.Phase == corev1.PodFailed)
		return done, fmt.Sprintf("%v phase %s", err, proc.Status.Phase), nil
	})
	logs, lerr := exec.CommandContext(ctx, filepath.Join(c.o.BinDir, "kubectl"), "--kubeconfig", c.Kubeconfig(), "logs", "-n", ns, proc.Name).CombinedOutput()
	t.Logf("kubectl logs %s (%v):\n%s", proc.Name, lerr, logs)
	if err != nil || proc.Status.Phase != corev1.PodSucceeded {
		t.Errorf("pod %s: %v, phase %s, want Succeeded", proc.Name, err, proc.Status.Phase)
	}
	// Any HTTP status will do: it took a route to the node IP and a TLS
	// handshake the cluster CA verifies (curl writes 000 when it got none).
	for _, want := range []string{`hello from on-process-node\n`, `status server answered [1-5]\d\d\n`} {
		if !regexp.MustCompile(want).Match(logs) {
			t.Errorf("kubectl logs %s lacks %q", proc.Name, want)
		}
	}

	checkProcessNodeReport(ctx, t, c)
}

// checkProcessNodeReport runs test/processnode_e2e's upstream-shaped report
// script as a TrainJob on the process node and checks what it sent landed
// in status.trainerStatus.
func checkProcessNodeReport(ctx context.Context, t *testing.T, c *Cluster) {
	t.Helper()
	const ns, name = "default", "report"
	script, err := os.ReadFile(filepath.Join(c.o.RepoDir, "test", "processnode_e2e", "testdata", "status_update.py"))
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{Data: map[string]string{"status_update.py": string(script)}}
	cm.Name, cm.Namespace = "status-script", ns
	if err := c.client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	tj := mustObject(t, fmt.Sprintf(`
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: %s, namespace: %s}
spec:
  runtimeRef: {name: torch-distributed}
  trainer:
    numNodes: 1
    command: [python3, /opt/status/status_update.py]
  podTemplateOverrides:
  - targetJobs: [{name: node}]
    spec:
      nodeSelector: {kubernetes.io/hostname: %s}
      volumes: [{name: status, configMap: {name: status-script}}]
      containers: [{name: node, volumeMounts: [{name: status, mountPath: /opt/status, readOnly: true}]}]
`, name, ns, ProcessNodeName(0)))
	if err := c.client.Create(ctx, tj); err != nil {
		t.Fatal(err)
	}
	waitCondition(ctx, t, c, tj, "Complete", 3*time.Minute)
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(tj.GroupVersionKind())
	if err := c.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, got); err != nil {
		t.Fatal(err)
	}
	progress, _, _ := unstructured.NestedInt64(got.Object, "status", "trainerStatus", "progressPercentage")
	metrics, _, _ := unstructured.NestedSlice(got.Object, "status", "trainerStatus", "metrics")
	if progress != 42 || len(metrics) != 2 {
		t.Errorf("status.trainerStatus %v, want the script's progressPercentage 42 and its 2 metrics", got.Object["status"])
	}
}
