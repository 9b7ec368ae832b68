package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainyard/trainyard/pkg/processnode/gpus"
)

func TestPlacementFor(t *testing.T) {
	node := func(name string, count int64) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			gpus.LabelProduct: "NVIDIA-H200", gpus.LabelMemory: "143771"}}}
		n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}
		if count >= 0 {
			n.Status.Allocatable[gpus.Resource] = *resource.NewQuantity(count, resource.DecimalSI)
		}
		return n
	}
	type got struct {
		Nodes     int
		Resources string
	}
	cases := map[string]struct {
		nodes []corev1.Node
		want  got
	}{
		"no GPU resource: the guide's CPUs": {nodes: []corev1.Node{node("pn", -1)}, want: got{2, "cpu=2,memory=1Gi"}},
		"zero GPUs":                         {nodes: []corev1.Node{node("pn", 0)}, want: got{2, "cpu=2,memory=1Gi"}},
		"one GPU: one node":                 {nodes: []corev1.Node{node("pn", 1)}, want: got{1, "cpu=2,memory=1Gi,gpu=1"}},
		"a node per GPU over two nodes":     {nodes: []corev1.Node{node("a", 4), node("b", 2)}, want: got{6, "cpu=2,memory=1Gi,gpu=1"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := placementFor(tc.nodes)
			if diff := cmp.Diff(tc.want, got{p.nodes, p.resources}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if p.about == "" {
				t.Error("no description")
			}
		})
	}
}
