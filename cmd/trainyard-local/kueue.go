package main

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainyard/trainyard/pkg/localcluster"
	"github.com/trainyard/trainyard/pkg/processnode"
	"github.com/trainyard/trainyard/pkg/processnode/gpus"
)

// runQueue is the LocalQueue that `run -kueue` submits the guide to, in the
// namespace the guide runs in, and runClusterQueue the ClusterQueue behind it.
const (
	runQueue        = "local"
	runClusterQueue = "trainyard-local"
)

// setUpQueue gives the cluster what a platform team gives its users before
// they submit through Kueue (README, "Queueing with Kueue"): a ResourceFlavor, a ClusterQueue
// whose quota is what the process nodes offer (CPU, memory and GPUs), and the
// LocalQueue runQueue in the guide's namespace. Kueue then admits the guide's
// TrainJob as one gang: all its nodes at once, or none while the quota is short.
func setUpQueue(ctx context.Context, c *localcluster.Cluster) (string, error) {
	var nodes corev1.NodeList
	if err := c.Client().List(ctx, &nodes, client.HasLabels{processnode.ProcessNodeLabel}); err != nil {
		return "", fmt.Errorf("listing the process nodes: %w", err)
	}
	quota := corev1.ResourceList{}
	for _, n := range nodes.Items {
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, gpus.Resource} {
			q := quota[r]
			q.Add(n.Status.Allocatable[r])
			quota[r] = q
		}
	}
	cpu, mem, gpu := quota[corev1.ResourceCPU], quota[corev1.ResourceMemory], quota[gpus.Resource]
	// Kueue wants a quota for every resource a workload asks for.
	if gpu.IsZero() {
		gpu = resource.MustParse("0")
	}
	objs, err := decodeYAML(fmt.Appendf(nil, `apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: %[1]s}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory, %[2]s]
    flavors:
    - name: default-flavor
      resources:
      - {name: cpu, nominalQuota: "%[3]s"}
      - {name: memory, nominalQuota: "%[4]s"}
      - {name: %[2]s, nominalQuota: "%[5]s"}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: %[6]s, namespace: %[7]s}
spec: {clusterQueue: %[1]s}
`, runClusterQueue, gpus.Resource, cpu.String(), mem.String(), gpu.String(), runQueue, namespace))
	if err != nil {
		return "", err
	}
	if err := c.Apply(ctx, objs...); err != nil {
		return "", fmt.Errorf("creating the Kueue queues: %w", err)
	}
	return fmt.Sprintf("ClusterQueue %s (quota cpu %s, memory %s, %s %s: the process node's), LocalQueue %s/%s",
		runClusterQueue, cpu.String(), mem.String(), gpus.Resource, gpu.String(), namespace, runQueue), nil
}
