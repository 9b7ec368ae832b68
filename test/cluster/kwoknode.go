package cluster

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// AddKwokNode adds a kwok node of the CPU pool (labels and taint as the nodes
// Up creates) with this CPU and memory capacity (quantities, e.g. "32" and
// "256Gi"; Options.PodsPerNode pods) to the running cluster, and returns once
// kwok reports it Ready, e.g. to give a waiting gang the capacity it lacks.
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
	n := &corev1.Node{}
	n.Name = name
	n.Labels = map[string]string{
		"type": "kwok", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
		PoolLabel: "cpu",
	}
	n.Annotations = map[string]string{KwokNodeKey: KwokNodeValue, "node.alpha.kubernetes.io/ttl": "0"}
	if !c.o.UntaintedNodes {
		n.Spec.Taints = []corev1.Taint{{Key: KwokNodeKey, Value: KwokNodeValue, Effect: corev1.TaintEffectNoSchedule}}
	}
	if err := c.client.Create(ctx, n); err != nil {
		return fmt.Errorf("creating node %s: %w", name, err)
	}
	// The API server drops the status of a created Node, and kwok writes it
	// meanwhile: merge-patch the capacity until the node is Ready with it.
	capacity, err := json.Marshal(map[string]any{"status": corev1.NodeStatus{Capacity: res, Allocatable: res}})
	if err != nil {
		return err
	}
	return c.poll(ctx, "node "+name+" to become Ready with its capacity", func() (bool, string, error) {
		var got corev1.Node
		if err := c.client.Get(ctx, types.NamespacedName{Name: name}, &got); err != nil {
			return false, "", err
		}
		if !sameResources(got.Status.Capacity, res) || !sameResources(got.Status.Allocatable, res) {
			return false, "capacity not set", c.client.Status().Patch(ctx, &got, client.RawPatch(types.MergePatchType, capacity))
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return true, "", nil
			}
		}
		return false, "not Ready", nil
	})
}

func sameResources(a, b corev1.ResourceList) bool {
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
