package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/localcluster"
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
	// Pods of the run bound to it, those not finished yet, and their jobs.
	// The pod garbage collector deletes them all, finished or not.
	Pods           int      `json:"pods"`
	Unfinished     int      `json:"unfinished"`
	Jobs           []string `json:"jobs"`
	UnfinishedJobs []string `json:"unfinishedJobs"`
}

// loseNode deletes the kwok node with the most unfinished pods of the run, as
// a node that died and was removed: its pods are orphaned, the pod garbage
// collector deletes them, the Jobs of those not finished fail, and each such
// JobSet's failure policy restarts it.
func loseNode(ctx context.Context, cli client.Client) (nodeLoss, error) {
	var pods corev1.PodList
	if err := cli.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		return nodeLoss{}, err
	}
	bound, unfinished := map[string][]corev1.Pod{}, map[string]int{}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" {
			continue
		}
		bound[p.Spec.NodeName] = append(bound[p.Spec.NodeName], p)
		if p.Status.Phase == corev1.PodPending || p.Status.Phase == corev1.PodRunning {
			unfinished[p.Spec.NodeName]++
		}
	}
	var loss nodeLoss
	for node := range bound {
		if n := unfinished[node]; n > loss.Unfinished || n == loss.Unfinished && (loss.Node == "" || node < loss.Node) {
			loss.Node, loss.Unfinished = node, n
		}
	}
	if loss.Unfinished == 0 {
		// A small run can be over before the fault's moment (the second half
		// of -window); say what to change rather than only what happened.
		if len(bound) > 0 {
			return loss, fmt.Errorf("every pod of the run has finished, so losing a node tests nothing: use a larger -n or a shorter -window, or -node-losses 0")
		}
		return loss, fmt.Errorf("no pod of the run is on a node yet: use a longer -window, or -node-losses 0")
	}
	jobs, open := map[string]bool{}, map[string]bool{}
	for _, p := range bound[loss.Node] {
		loss.Pods++
		name := p.Labels["jobset.sigs.k8s.io/jobset-name"]
		if name != "" && !jobs[name] {
			jobs[name] = true
			loss.Jobs = append(loss.Jobs, name)
		}
		if name != "" && !open[name] && (p.Status.Phase == corev1.PodPending || p.Status.Phase == corev1.PodRunning) {
			open[name] = true
			loss.UnfinishedJobs = append(loss.UnfinishedJobs, name)
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

func (f fault) run(ctx context.Context, c *localcluster.Cluster, cli client.Client, rep *report, start time.Time, replicas *sync.Mutex) error {
	since := func() float64 { return time.Since(start).Seconds() }
	switch f.kind {
	case faultKill:
		k, err := killLeader(ctx, c, start, replicas)
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
		logf("deleted node %s at %.1fs: %d pods of %d jobs bound to it, %d of %d jobs not finished", loss.Node, loss.At, loss.Pods, len(loss.Jobs), loss.Unfinished, len(loss.UnfinishedJobs))
		rep.NodeLosses = append(rep.NodeLosses, loss)
	}
	return nil
}
