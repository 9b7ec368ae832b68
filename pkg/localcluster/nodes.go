package localcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// createNodes creates the kwok nodes: kwok's fake-node annotation and taint, and
// the capacity the brief of this cluster calls for.
func (c *Cluster) createNodes(ctx context.Context) error {
	mk := func(name, pool string, gpus int) *corev1.Node {
		res := corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("32"),
			corev1.ResourceMemory: resource.MustParse("256Gi"),
			corev1.ResourcePods:   *resource.NewQuantity(int64(c.o.PodsPerNode), resource.DecimalSI),
		}
		if gpus > 0 {
			res[GPUResource] = *resource.NewQuantity(int64(gpus), resource.DecimalSI)
		}
		n := &corev1.Node{}
		n.Name = name
		n.Labels = map[string]string{
			"type":                   "kwok",
			"kubernetes.io/hostname": name,
			"kubernetes.io/os":       "linux",
			"kubernetes.io/arch":     "amd64",
			PoolLabel:                pool,
		}
		n.Annotations = map[string]string{KwokNodeKey: KwokNodeValue, "node.alpha.kubernetes.io/ttl": "0"}
		if !c.o.UntaintedNodes {
			n.Spec.Taints = []corev1.Taint{{Key: KwokNodeKey, Value: KwokNodeValue, Effect: corev1.TaintEffectNoSchedule}}
		}
		n.Status.Capacity = res
		n.Status.Allocatable = res.DeepCopy()
		return n
	}
	var nodes []*corev1.Node
	for i := 0; i < c.o.CPUNodes; i++ {
		nodes = append(nodes, mk(fmt.Sprintf("kwok-cpu-%d", i), "cpu", 0))
	}
	for i := 0; i < c.o.GPUNodes; i++ {
		nodes = append(nodes, mk(fmt.Sprintf("kwok-gpu-%d", i), "gpu", c.o.GPUsPerNode))
	}
	for _, n := range nodes {
		want := n.Status.DeepCopy()
		if err := c.client.Create(ctx, n); err != nil {
			return fmt.Errorf("creating node %s: %w", n.Name, err)
		}
		if len(n.Status.Capacity) == 0 { // in case the API server dropped the status
			n.Status = *want
			if err := c.client.Status().Update(ctx, n); err != nil {
				return fmt.Errorf("setting status of node %s: %w", n.Name, err)
			}
		}
	}
	return nil
}

// waitNodesReady waits until every kwok, process and container node is Ready and carries no
// taint but kwok's.
func (c *Cluster) waitNodesReady(ctx context.Context) error {
	want := c.o.CPUNodes + c.o.GPUNodes + c.o.ProcessNodes + c.o.ContainerNodes
	return c.poll(ctx, "nodes to become Ready", func() (bool, string, error) {
		var nl corev1.NodeList
		if err := c.client.List(ctx, &nl); err != nil {
			return false, "", err
		}
		ready := 0
		var notReady []string
		for _, n := range nl.Items {
			ok := false
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ok = true
				}
			}
			for _, t := range n.Spec.Taints {
				if t.Key != KwokNodeKey {
					ok = false
				}
			}
			if ok {
				ready++
			} else {
				notReady = append(notReady, n.Name)
			}
		}
		return ready >= want, fmt.Sprintf("%d/%d ready, waiting for %v", ready, want, notReady), nil
	})
}

func (c *Cluster) waitServiceAccount(ctx context.Context, ns string) error {
	return c.poll(ctx, "ServiceAccount "+ns+"/default", func() (bool, string, error) {
		err := c.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "default"}, &corev1.ServiceAccount{})
		if apierrors.IsNotFound(err) {
			return false, "not found", nil
		}
		return err == nil, "", err
	})
}
