package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/test/cluster"
)

// restartRuntime is the chaos namespace's runtime: the shipped
// torch-distributed one, made to survive a lost node as a careful platform
// team would make it: a failed pod fails its Job at once (backoffLimit 0), and
// the JobSet then restarts every pod together (torch ranks cannot rejoin one
// by one), up to 3 times.
const restartRuntime = "torch-restartable"

func createRestartRuntime(ctx context.Context, cli client.Client, repo string) error {
	b, err := os.ReadFile(filepath.Join(repo, "runtimes", "torch-distributed.yaml"))
	if err != nil {
		return err
	}
	var ctr trainer.ClusterTrainingRuntime
	if err := yaml.Unmarshal(b, &ctr); err != nil {
		return fmt.Errorf("torch-distributed.yaml: %w", err)
	}
	rt := &trainer.TrainingRuntime{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: restartRuntime, Labels: ctr.Labels},
		Spec:       ctr.Spec,
	}
	js := &rt.Spec.Template.Spec
	js.FailurePolicy = &jobsetv1alpha2.FailurePolicy{MaxRestarts: 3}
	for i := range js.ReplicatedJobs {
		js.ReplicatedJobs[i].Template.Spec.BackoffLimit = ptr.To[int32](0)
	}
	return cli.Create(ctx, rt)
}

// nodeLoss is a kwok node deleted while pods of the run were on it.
type nodeLoss struct {
	At   float64 `json:"at"` // seconds after the first create
	Node string  `json:"node"`
	// Pods of the run that were bound to it, and their TrainJobs.
	Pods int      `json:"pods"`
	Jobs []string `json:"jobs"`
}

// loseNode deletes the kwok node with the most pods of the run, as a node that
// died and was removed: its pods are orphaned, the pod garbage collector
// deletes them, their Jobs fail, and each JobSet's failure policy restarts it.
func loseNode(ctx context.Context, cli client.Client) (nodeLoss, error) {
	var pods corev1.PodList
	if err := cli.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		return nodeLoss{}, err
	}
	perNode := map[string][]corev1.Pod{}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			perNode[p.Spec.NodeName] = append(perNode[p.Spec.NodeName], p)
		}
	}
	var loss nodeLoss
	for node, ps := range perNode {
		if len(ps) > loss.Pods || len(ps) == loss.Pods && node < loss.Node {
			loss.Node, loss.Pods = node, len(ps)
		}
	}
	if loss.Node == "" {
		return loss, fmt.Errorf("no node has running pods of the run")
	}
	jobs := map[string]bool{}
	for _, p := range perNode[loss.Node] {
		if name := p.Labels["jobset.sigs.k8s.io/jobset-name"]; name != "" && !jobs[name] {
			jobs[name] = true
			loss.Jobs = append(loss.Jobs, name)
		}
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: loss.Node}}
	return loss, cli.Delete(ctx, node)
}

// restart is a component restarted by the run.
type restart struct {
	At      float64 `json:"at"`      // seconds after the first create
	Seconds float64 `json:"seconds"` // until it was healthy again
}

type faultKind int

const (
	faultKill faultKind = iota
	faultAPIServer
	faultEtcd
	faultNode
)

// fault is one fault of the run, at its moment after the first create.
type fault struct {
	at   time.Duration
	kind faultKind
}

func (f fault) run(ctx context.Context, c *cluster.Cluster, cli client.Client, rep *report, start time.Time) error {
	since := func() float64 { return time.Since(start).Seconds() }
	switch f.kind {
	case faultKill:
		k, err := killLeader(ctx, c, start)
		if err != nil {
			return err
		}
		rep.Kills = append(rep.Kills, k)
	case faultAPIServer:
		logf("restarting the API server at %.1fs", since())
		rep.APIRestartAt = since()
		t := time.Now()
		if err := c.RestartAPIServer(ctx); err != nil {
			return fmt.Errorf("restarting the API server: %w", err)
		}
		rep.APIRestartSecs = time.Since(t).Seconds()
	case faultEtcd:
		logf("SIGKILL etcd at %.1fs, and start it again", since())
		r := restart{At: since()}
		t := time.Now()
		if err := c.RestartEtcd(ctx); err != nil {
			return fmt.Errorf("restarting etcd: %w", err)
		}
		r.Seconds = time.Since(t).Seconds()
		rep.EtcdRestarts = append(rep.EtcdRestarts, r)
	case faultNode:
		loss, err := loseNode(ctx, cli)
		loss.At = since()
		if err != nil {
			return fmt.Errorf("losing a node: %w", err)
		}
		logf("deleted node %s at %.1fs with %d running pods of %d jobs", loss.Node, loss.At, loss.Pods, len(loss.Jobs))
		rep.NodeLosses = append(rep.NodeLosses, loss)
	}
	return nil
}
