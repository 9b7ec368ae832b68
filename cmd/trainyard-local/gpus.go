package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainyard/trainyard/pkg/processnode"
	"github.com/trainyard/trainyard/pkg/processnode/gpus"
)

// placement is how make run trains the guide: where the process node has GPUs,
// one node per GPU with `nvidia.com/gpu: 1` each, as the guide asks, so each
// rank gets its own GPU and train.py uses NCCL; otherwise the guide's 2 nodes
// of 2 CPUs, gloo.
type placement struct {
	nodes     int
	resources string
	// about says which devices, for the terminal.
	about string
}

func choosePlacement(ctx context.Context, cl client.Client) (placement, error) {
	var nodes corev1.NodeList
	if err := cl.List(ctx, &nodes, client.HasLabels{processnode.ProcessNodeLabel}); err != nil {
		return placement{}, fmt.Errorf("listing the process nodes: %w", err)
	}
	return placementFor(nodes.Items), nil
}

// placementFor decides from the process nodes' allocatable GPUs and the labels
// NVIDIA's feature discovery sets (which the process node sets too).
func placementFor(nodes []corev1.Node) placement {
	total := 0
	var products []string
	for _, n := range nodes {
		q, ok := n.Status.Allocatable[gpus.Resource]
		if !ok || q.Value() == 0 {
			continue
		}
		total += int(q.Value())
		products = append(products, fmt.Sprintf("%s: %d x %s (%s MiB)", n.Name, q.Value(),
			n.Labels[gpus.LabelProduct], n.Labels[gpus.LabelMemory]))
	}
	if total == 0 {
		return placement{nodes: 2, resources: "cpu=2,memory=1Gi",
			about: "no GPUs on the process node (nvidia-smi found none): 2 nodes of 2 CPUs, gloo"}
	}
	sort.Strings(products)
	return placement{nodes: total, resources: "cpu=2,memory=1Gi,gpu=1",
		about: fmt.Sprintf("%d GPU(s) on the process node (%s): %d node(s) of 1 GPU each, NCCL; the GPU each node gets is in `trainyard get`",
			total, strings.Join(products, "; "), total)}
}
