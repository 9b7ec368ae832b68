package localcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/trainyard/trainyard/test/prereq"
)

// TestSmoke brings a whole cluster up in a temporary state directory, runs a plain
// JobSet, a Kueue-admitted JobSet and a TrainJob to completion, and checks that Down
// leaves no process behind.
func TestSmoke(t *testing.T) {
	o := Options{StateDir: t.TempDir(), CPUNodes: 2, GPUNodes: 1, GPUsPerNode: 4}
	missing, err := MissingBinaries(o)
	if err != nil {
		t.Fatal(err)
	}
	prereq.Requiref(t, len(missing) == 0, "local cluster binaries missing (build them with `make cluster-tools`): %s", strings.Join(missing, ", "))
	prereq.Require(t, os.Geteuid() == 0, "the local cluster needs root (Kueue runs with a private /etc overlay): run the tests as root")
	if testing.Verbose() {
		o.Progress = testWriter{t}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	start := time.Now()
	c, down := upForTest(ctx, t, o)
	t.Logf("Up took %s", time.Since(start).Round(100*time.Millisecond))
	procs := c.Processes()
	logRSS(t, procs)

	const ns = "smoke"
	if err := c.createNamespaces(ctx, ns); err != nil {
		t.Fatal(err)
	}
	if err := c.waitServiceAccount(ctx, ns); err != nil {
		t.Fatal(err)
	}

	t.Run("workloads", func(t *testing.T) {
		t.Run("JobSet", func(t *testing.T) {
			t.Parallel()
			js := mustObject(t, jobSetYAML(ns, "plain", nil))
			if err := c.client.Create(ctx, js); err != nil {
				t.Fatal(err)
			}
			waitCondition(ctx, t, c, js, "Completed", 3*time.Minute)
		})
		t.Run("KueueJobSet", func(t *testing.T) {
			t.Parallel()
			for _, doc := range strings.Split(kueueQueuesYAML(ns), "---\n") {
				if err := c.Apply(ctx, mustObject(t, doc)); err != nil {
					t.Fatal(err)
				}
			}
			js := mustObject(t, jobSetYAML(ns, "queued", map[string]string{"kueue.x-k8s.io/queue-name": "smoke-lq"}))
			if err := c.client.Create(ctx, js); err != nil {
				t.Fatal(err)
			}
			if suspend, _, _ := unstructured.NestedBool(js.Object, "spec", "suspend"); !suspend {
				t.Errorf("Kueue's webhook did not suspend the queued JobSet on creation")
			}
			waitCondition(ctx, t, c, js, "Completed", 3*time.Minute)
			// The JobSet went through a Workload that Kueue admitted.
			var wls unstructured.UnstructuredList
			wls.SetGroupVersionKind(schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "WorkloadList"})
			if err := c.client.List(ctx, &wls, client.InNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			admitted := false
			for _, wl := range wls.Items {
				for _, ref := range wl.GetOwnerReferences() {
					if ref.Kind == "JobSet" && ref.Name == "queued" && hasCondition(&wl, "Admitted") {
						admitted = true
					}
				}
			}
			if !admitted {
				t.Errorf("no admitted Workload for JobSet queued among %d workloads", len(wls.Items))
			}
		})
		t.Run("TrainJob", func(t *testing.T) {
			t.Parallel()
			tj := mustObject(t, trainJobYAML(ns, "torch"))
			if err := c.client.Create(ctx, tj); err != nil {
				t.Fatal(err)
			}
			waitCondition(ctx, t, c, tj, "Complete", 3*time.Minute)
			js := &unstructured.Unstructured{}
			js.SetGroupVersionKind(schema.GroupVersionKind{Group: "jobset.x-k8s.io", Version: "v1alpha2", Kind: "JobSet"})
			if err := c.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "torch"}, js); err != nil {
				t.Fatalf("the TrainJob's JobSet: %v", err)
			}
			if !hasCondition(js, "Completed") {
				t.Errorf("JobSet torch is not Completed: %v", js.Object["status"])
			}
		})
	})

	t.Run("RestartKueue", func(t *testing.T) {
		start := time.Now()
		fw := []string{"batch/job", "jobset.x-k8s.io/jobset"}
		if err := c.RestartKueue(ctx, fw); err != nil {
			t.Fatal(err)
		}
		t.Logf("RestartKueue took %s", time.Since(start).Round(100*time.Millisecond))
		cfg, err := os.ReadFile(filepath.Join(o.StateDir, "config", "kueue.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(cfg), "trainer.kubeflow.org/trainjob") || !reflect.DeepEqual(c.KueueFrameworks(), fw) {
			t.Errorf("Kueue runs with %v; config:\n%s", c.KueueFrameworks(), cfg)
		}
		js := mustObject(t, jobSetYAML(ns, "queued-again", map[string]string{"kueue.x-k8s.io/queue-name": "smoke-lq"}))
		if err := c.client.Create(ctx, js); err != nil {
			t.Fatal(err)
		}
		if suspend, _, _ := unstructured.NestedBool(js.Object, "spec", "suspend"); !suspend {
			t.Errorf("the restarted Kueue's webhook did not suspend the queued JobSet")
		}
		waitCondition(ctx, t, c, js, "Completed", 3*time.Minute)
	})

	t.Run("RestartManager", func(t *testing.T) {
		old, ok := c.sup.find(Manager)
		if !ok {
			t.Fatal("no manager process")
		}
		if err := c.StopManager(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if procAlive(old.PID, old.StartTime) {
			t.Fatalf("manager pid %d still alive after StopManager", old.PID)
		}
		if err := c.StopManager(syscall.SIGTERM); err == nil {
			t.Errorf("StopManager of a stopped manager did not fail")
		}
		start := time.Now()
		if err := c.StartManager(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("StartManager took %s", time.Since(start).Round(100*time.Millisecond))
		// The webhooks answer again: a TrainJob is admitted (mutating webhook, failurePolicy Fail).
		tj := mustObject(t, trainJobYAML(ns, "after-restart"))
		if err := c.client.Create(ctx, tj); err != nil {
			t.Fatalf("creating a TrainJob after the restart: %v", err)
		}
	})

	downStart := time.Now()
	if err := down(); err != nil {
		t.Fatalf("Down: %v", err)
	}
	t.Logf("Down took %s", time.Since(downStart).Round(100*time.Millisecond))
	for _, p := range procs {
		if procAlive(p.PID, 0) {
			t.Errorf("%s (pid %d) still runs after Down", p.Name, p.PID)
		}
	}
	if st, _, err := StatusOf(o.StateDir); err != nil || len(st) != 0 {
		t.Errorf("state after Down: %v, %v", st, err)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// logRSS logs the resident memory of each component.
// upForTest starts the cluster of o for a test. It is taken down when the test
// ends unless the test did so itself with down (a Down that failed is tried
// again); if the test failed, the end of every component's log is printed
// first.
func upForTest(ctx context.Context, t *testing.T, o Options) (c *Cluster, down func() error) {
	t.Helper()
	c, err := Up(ctx, o)
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	downDone := false
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range c.Processes() {
				t.Logf("---- end of %s:\n%s", p.Log, tail(p.Log, 40))
			}
		}
		if !downDone {
			if err := c.Down(); err != nil {
				t.Errorf("Down: %v", err)
			}
		}
	})
	return c, func() error {
		err := c.Down()
		downDone = err == nil
		return err
	}
}

func logRSS(t *testing.T, procs []Process) {
	var parts []string
	total := 0
	for _, p := range procs {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.PID))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
				var kb int
				_, _ = fmt.Sscan(f[1], &kb)
				total += kb
				parts = append(parts, fmt.Sprintf("%s %dMiB", p.Name, kb/1024))
			}
		}
	}
	t.Logf("RSS after Up: %s; total %dMiB", strings.Join(parts, ", "), total/1024)
}

func mustObject(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
		t.Fatalf("%v in\n%s", err, y)
	}
	return u
}

func hasCondition(u *unstructured.Unstructured, typ string) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]interface{})
		if m["type"] == typ && m["status"] == "True" {
			return true
		}
	}
	return false
}

// waitCondition waits for condition typ=True on obj, failing early on Failed=True.
func waitCondition(ctx context.Context, t *testing.T, c *Cluster, obj *unstructured.Unstructured, typ string, timeout time.Duration) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	key := client.ObjectKeyFromObject(obj)
	for {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(obj.GroupVersionKind())
		err := c.client.Get(ctx, key, u)
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("getting %s %s: %v", obj.GetKind(), key, err)
		}
		if err == nil {
			if hasCondition(u, typ) {
				t.Logf("%s %s is %s after %s", obj.GetKind(), key, typ, time.Since(start).Round(100*time.Millisecond))
				return
			}
			if hasCondition(u, "Failed") {
				st, _ := json.Marshal(u.Object["status"])
				t.Fatalf("%s %s failed: %s", obj.GetKind(), key, st)
			}
		}
		if time.Now().After(deadline) {
			st, _ := json.Marshal(u.Object["status"])
			var pods corev1.PodList
			_ = c.client.List(ctx, &pods, client.InNamespace(key.Namespace))
			var ps []string
			for _, p := range pods.Items {
				ps = append(ps, fmt.Sprintf("%s=%s@%s", p.Name, p.Status.Phase, p.Spec.NodeName))
			}
			t.Fatalf("%s %s not %s after %s; status %s; pods %v", obj.GetKind(), key, typ, timeout, st, ps)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// fastPods makes kwok move the smoke test's pods along in well under a second per step.
func fastPods() string {
	b, _ := json.Marshal(KwokDelayAnnotations(100*time.Millisecond, 400*time.Millisecond))
	return string(b)
}

func jobSetYAML(ns, name string, labels map[string]string) string {
	l, _ := json.Marshal(labels)
	return fmt.Sprintf(`
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: %s, namespace: %s, labels: %s}
spec:
  replicatedJobs:
  - name: w
    replicas: 1
    template:
      spec:
        parallelism: 2
        completions: 2
        backoffLimit: 0
        template:
          metadata: {annotations: %s}
          spec:
            restartPolicy: Never
            tolerations: [{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}]
            containers:
            - name: c
              image: busybox
              resources: {requests: {cpu: "1", memory: 1Gi}}
`, name, ns, l, fastPods())
}

func kueueQueuesYAML(ns string) string {
	return fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: smoke-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: smoke-cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: smoke-flavor
      resources:
      - {name: cpu, nominalQuota: 8}
      - {name: memory, nominalQuota: 32Gi}
      - {name: nvidia.com/gpu, nominalQuota: 4}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: smoke-lq, namespace: %s}
spec: {clusterQueue: smoke-cq}
`, ns)
}

func trainJobYAML(ns, name string) string {
	return fmt.Sprintf(`
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: %s, namespace: %s}
spec:
  runtimeRef: {name: torch-distributed}
  trainer:
    numNodes: 2
    command: [torchrun, /app/train.py]
    resourcesPerNode: {requests: {cpu: "1", memory: 1Gi}}
  podTemplateOverrides:
  - targetJobs: [{name: node}]
    metadata: {annotations: %s}
    spec:
      tolerations: [{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}]
`, name, ns, fastPods())
}
