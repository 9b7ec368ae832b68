package localcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Volcano's components (Options.GangScheduler = GangSchedulerVolcano), built by
// test/tools/build.sh from test/tools/volcano; also their log names.
const (
	VolcanoScheduler   = "volcano-scheduler"
	VolcanoControllers = "volcano-controller-manager"
)

// Volcano's names the cluster relies on.
const (
	// VolcanoSchedulerName is the schedulerName of the pods Volcano places.
	VolcanoSchedulerName = "volcano"
	// VolcanoDefaultQueue is the queue of a PodGroup that names none; the
	// scheduler creates it when it starts.
	VolcanoDefaultQueue = "default"
)

// VolcanoQueueGVK is the kind of Volcano's queues (cluster-scoped).
var VolcanoQueueGVK = schema.GroupVersionKind{Group: "scheduling.volcano.sh", Version: "v1beta1", Kind: "Queue"}

// volcanoCRDDir holds the CRDs Volcano v1.10.0 ships (in its module zip):
// scheduling.volcano.sh PodGroups and Queues, which the scheduler needs;
// bus.volcano.sh Commands, which the queue controller watches (open/close a
// queue); nodeinfo.volcano.sh Numatopologies, which the scheduler watches
// under its ResourceTopology feature gate (on by default); batch.volcano.sh
// Jobs, Volcano's own job API, so that its users' YAML applies too.
const volcanoCRDDir = "installer/helm/chart/volcano/crd/bases"

// volcanoSchedulerConf is the scheduler's configuration: upstream's default
// (its Helm chart's volcano-scheduler.conf). The gang plugin is what holds a
// PodGroup's pods until all of them fit; enqueue admits a PodGroup to its
// queue only when the queue and the cluster have room for its minResources.
const volcanoSchedulerConf = `actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: capacity
  - name: nodeorder
  - name: binpack
`

func volcanoBinaries(o Options) []string {
	return []string{filepath.Join(o.BinDir, VolcanoScheduler), filepath.Join(o.BinDir, VolcanoControllers)}
}

// prepareVolcano reads Volcano's CRDs from the module the binaries are built
// from (so they always match) and writes the scheduler configuration.
// It runs after renderCRDs.
func (c *Cluster) prepareVolcano(ctx context.Context) error {
	dir, err := moduleDir(ctx, c.bin(VolcanoScheduler), "volcano.sh/volcano")
	if err != nil {
		return err
	}
	return c.prepareVolcanoFrom(dir)
}

// prepareVolcanoFrom reads Volcano's CRDs from dir, the volcano.sh/volcano
// module its binaries were built from, and writes the scheduler's configuration.
func (c *Cluster) prepareVolcanoFrom(dir string) error {
	objs, err := readYAMLFiles(filepath.Join(dir, volcanoCRDDir))
	if err != nil {
		return fmt.Errorf("volcano CRDs: %w", err)
	}
	var crds []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			crds = append(crds, o)
		}
	}
	if len(crds) == 0 {
		return fmt.Errorf("volcano CRDs: none in %s", filepath.Join(dir, volcanoCRDDir))
	}
	c.crds = append(c.crds, crds...)
	if err := writeManifests(filepath.Join(c.o.StateDir, "manifests", "volcano-crds.yaml"), crds); err != nil {
		return err
	}
	return os.WriteFile(c.volcanoConf(), []byte(volcanoSchedulerConf), 0o644)
}

func (c *Cluster) volcanoConf() string {
	return filepath.Join(c.o.StateDir, "config", "volcano-scheduler.conf")
}

// volcanoSchedulerArgs: no leader election (one replica), health on the
// loopback interface only, no metrics server, no cache dumps in /tmp.
func (c *Cluster) volcanoSchedulerArgs() []string {
	return append([]string{c.bin(VolcanoScheduler),
		"--kubeconfig=" + c.Kubeconfig(),
		"--scheduler-name=" + VolcanoSchedulerName,
		"--scheduler-conf=" + c.volcanoConf(),
		"--default-queue=" + VolcanoDefaultQueue,
		"--schedule-period=1s",
		"--leader-elect=false",
		"--enable-healthz", "--healthz-address=" + loopback(c.ports.VolcanoSchedulerHealth),
		"--enable-metrics=false",
		"--cache-dumper=false",
		// Scheduling decisions (why a PodGroup waits) at -v=3.
		"-v=3",
	}, c.qpsArgs()...)
}

// volcanoControllersArgs runs the two controllers a PodGroup needs: the
// PodGroup controller (a group for a Volcano pod that names none) and the
// queue controller (each queue's status: its PodGroups by phase). The job,
// jobflow, jobtemplate and garbage-collection controllers are for Volcano's
// own Job API, which Trainyard does not use.
func (c *Cluster) volcanoControllersArgs() []string {
	return append([]string{c.bin(VolcanoControllers),
		"--kubeconfig=" + c.Kubeconfig(),
		"--scheduler-name=" + VolcanoSchedulerName,
		"--controllers=+pg-controller,+queue-controller",
		"--leader-elect=false",
		"--enable-healthz", "--healthz-address=" + loopback(c.ports.VolcanoControllerHealth),
	}, c.qpsArgs()...)
}

// startVolcano starts Volcano's scheduler and controllers once the CRDs are
// established, and returns when both are healthy and the scheduler has
// created the default queue (it does so before it starts scheduling).
func (c *Cluster) startVolcano(ctx context.Context) error {
	sched, err := c.sup.start(VolcanoScheduler, c.volcanoSchedulerArgs(), false)
	if err != nil {
		return err
	}
	ctrl, err := c.sup.start(VolcanoControllers, c.volcanoControllersArgs(), false)
	if err != nil {
		return err
	}
	if err := c.waitHTTP(ctx, sched, fmt.Sprintf("http://%s/healthz", loopback(c.ports.VolcanoSchedulerHealth)), nil); err != nil {
		return err
	}
	if err := c.waitHTTP(ctx, ctrl, fmt.Sprintf("http://%s/healthz", loopback(c.ports.VolcanoControllerHealth)), nil); err != nil {
		return err
	}
	if err := c.poll(ctx, "Volcano's default queue", func() (bool, string, error) {
		q := &unstructured.Unstructured{}
		q.SetGroupVersionKind(VolcanoQueueGVK)
		err := c.client.Get(ctx, client.ObjectKey{Name: VolcanoDefaultQueue}, q)
		if err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	}); err != nil {
		return err
	}
	c.progress("volcano-scheduler and volcano-controller-manager ready (scheduler name %q, queue %q)", VolcanoSchedulerName, VolcanoDefaultQueue)
	return nil
}

// initializingTaint keeps pods off a node AddKwokNode is still sizing.
var initializingTaint = corev1.Taint{Key: "trainyard.io/initializing", Effect: corev1.TaintEffectNoSchedule}

// AddKwokNode adds a CPU-pool kwok node (labels and taint as the nodes Up
// creates) with the given cpu and memory capacity (quantities, e.g. "4",
// "8Gi") and Options.PodsPerNode pods, and returns once it is Ready with that
// capacity; e.g. to give a waiting gang the capacity it lacks.
//
// The API server drops the status of a created Node, and kwok gives a node
// without capacity 1k CPUs until it reports it Ready, so a scheduler could
// see the node huge for a moment: the node carries a NoSchedule taint of its
// own until its capacity is in place.
func (c *Cluster) AddKwokNode(ctx context.Context, name, cpu, memory string) error {
	cpuQ, err := resource.ParseQuantity(cpu)
	if err != nil {
		return fmt.Errorf("node %s: cpu: %w", name, err)
	}
	memQ, err := resource.ParseQuantity(memory)
	if err != nil {
		return fmt.Errorf("node %s: memory: %w", name, err)
	}
	res := corev1.ResourceList{
		corev1.ResourceCPU:    cpuQ,
		corev1.ResourceMemory: memQ,
		corev1.ResourcePods:   *resource.NewQuantity(int64(c.o.PodsPerNode), resource.DecimalSI),
	}
	var taints []corev1.Taint
	if !c.o.UntaintedNodes {
		taints = []corev1.Taint{{Key: KwokNodeKey, Value: KwokNodeValue, Effect: corev1.TaintEffectNoSchedule}}
	}
	n := &corev1.Node{}
	n.Name = name
	n.Labels = map[string]string{
		"type": "kwok", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
		PoolLabel: "cpu",
	}
	n.Annotations = map[string]string{KwokNodeKey: KwokNodeValue, "node.alpha.kubernetes.io/ttl": "0"}
	n.Spec.Taints = append(slices.Clone(taints), initializingTaint)
	if err := c.client.Create(ctx, n); err != nil {
		return fmt.Errorf("creating node %s: %w", name, err)
	}
	// Merge patches, not updates: kwok writes the node's status meanwhile.
	capacity, err := json.Marshal(map[string]any{"status": corev1.NodeStatus{Capacity: res, Allocatable: res}})
	if err != nil {
		return err
	}
	if err := c.poll(ctx, "node "+name+" to become Ready with its capacity", func() (bool, string, error) {
		var got corev1.Node
		if err := c.client.Get(ctx, client.ObjectKey{Name: name}, &got); err != nil {
			return false, "", err
		}
		if !equalResources(got.Status.Allocatable, res) || !equalResources(got.Status.Capacity, res) {
			// Not yet set, or overwritten by kwok's initialization.
			return false, "capacity not set", c.client.Status().Patch(ctx, &got, client.RawPatch(types.MergePatchType, capacity))
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return true, "", nil
			}
		}
		return false, "not Ready", nil
	}); err != nil {
		return err
	}
	spec, err := json.Marshal(map[string]any{"spec": map[string]any{"taints": taints}})
	if err != nil {
		return err
	}
	if err := c.client.Patch(ctx, n, client.RawPatch(types.MergePatchType, spec)); err != nil {
		return fmt.Errorf("removing the taint %s of node %s: %w", initializingTaint.Key, name, err)
	}
	return nil
}

func equalResources(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, q := range b {
		if got, ok := a[k]; !ok || got.Cmp(q) != 0 {
			return false
		}
	}
	return true
}
