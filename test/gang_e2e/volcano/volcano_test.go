package volcano

import (
	"fmt"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/localcluster"
)

// TestVolcanoGang runs the scenarios in order on the shared cluster: each
// one leaves the nodes free for the next, and the second adds the third node
// the last one needs. A failed step stops the rest.
func TestVolcanoGang(t *testing.T) {
	for _, step := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"WithoutPodGroupPolicyStartsPartially", withoutGangStartsPartially},
		{"GangWaitsWholeThenBindsTogether", gangWaitsThenBinds},
		{"TwoGangsNeverSplit", twoGangsNeverSplit},
	} {
		if !t.Run(step.name, step.run) {
			return
		}
	}
}

// withoutGangStartsPartially is the control: the example job on the same
// runtime without its podGroupPolicy (and on the default scheduler) starts 2
// of its 3 pods on the 2 nodes, the third unschedulable. That partial start
// is what the gang prevents.
func withoutGangStartsPartially(t *testing.T) {
	ns := newNamespace(t)
	rt := exampleRuntimeWithout(t, "torch-distributed-no-gang")
	if err := cli.Create(ctx(), rt); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Delete(ctx(), rt) })
	job := exampleJob(t, ns, "no-gang", true)
	job.Spec.RuntimeRef.Name = rt.Name
	if err := cli.Create(ctx(), job); err != nil {
		t.Fatal(err)
	}
	waitFor(t, long, func() error {
		pods, err := jobPods(ns, job.Name)
		if err != nil {
			return err
		}
		bound, unschedulable := 0, 0
		for _, p := range pods {
			if p.Spec.SchedulerName != corev1.DefaultSchedulerName {
				return fmt.Errorf("pod %s: schedulerName %q, want the default scheduler", p.Name, p.Spec.SchedulerName)
			}
			if p.Spec.NodeName != "" {
				bound++
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
					unschedulable++
				}
			}
		}
		if len(pods) != 3 || bound != 2 || unschedulable != 1 {
			return fmt.Errorf("%d pods, %d bound, %d unschedulable, want 3, 2 and 1: %s", len(pods), bound, unschedulable, describe(byName(pods)))
		}
		return nil
	})
	if pg, err := podGroup(ns, job.Name); err == nil {
		t.Errorf("a PodGroup %s exists without podGroupPolicy", pg.GetName())
	}
	deleteJob(t, ns, job.Name)
}

// gangWaitsThenBinds: under Volcano the same 3-node job on 2 nodes binds no
// pod, and the TrainJob says why with Volcano's reason; its PodGroup is in
// the runtime's queue. A third node lets Volcano bind all 3 and the job
// completes.
func gangWaitsThenBinds(t *testing.T) {
	ns := newNamespace(t)
	var capacity atomic.Bool // set just before the third node is added
	pw := watchPods(t, ns, func(pods map[string]corev1.Pod) error {
		for _, p := range pods {
			if p.Spec.NodeName != "" && !capacity.Load() {
				return fmt.Errorf("pod %s bound to %s while the gang cannot fit: %s", p.Name, p.Spec.NodeName, describe(pods))
			}
		}
		return nil
	})
	job := exampleJob(t, ns, "gang", false)
	if err := cli.Create(ctx(), job); err != nil {
		t.Fatal(err)
	}
	waitFor(t, short, func() error {
		pods, err := jobPods(ns, job.Name)
		if err != nil {
			return err
		}
		if len(pods) != 3 {
			return fmt.Errorf("%d pods, want 3", len(pods))
		}
		for _, p := range pods {
			if p.Spec.SchedulerName != localcluster.VolcanoSchedulerName {
				return fmt.Errorf("pod %s: schedulerName %q, want %s", p.Name, p.Spec.SchedulerName, localcluster.VolcanoSchedulerName)
			}
		}
		return nil
	})
	got := waitGangReason(t, ns, job.Name)
	t.Logf("waiting: %s/%s: %s", got.Status.Phase, got.Status.Reason, got.Status.Message)

	// The PodGroup is in the runtime's queue, which Volcano's queue controller counts it in.
	pg, err := podGroup(ns, job.Name)
	if err != nil {
		t.Fatal(err)
	}
	if q, _, _ := unstructured.NestedString(pg.Object, "spec", "queue"); q != exampleQueue {
		t.Errorf("PodGroup queue %q, want %q (the runtime's annotation)", q, exampleQueue)
	}
	waitFor(t, short, func() error {
		q := &unstructured.Unstructured{}
		q.SetGroupVersionKind(localcluster.VolcanoQueueGVK)
		if err := cli.Get(ctx(), client.ObjectKey{Name: exampleQueue}, q); err != nil {
			return err
		}
		pending, _, _ := unstructured.NestedInt64(q.Object, "status", "pending")
		inqueue, _, _ := unstructured.NestedInt64(q.Object, "status", "inqueue")
		if pending+inqueue != 1 {
			return fmt.Errorf("queue %s status %v, want the waiting PodGroup counted (pending+inqueue = 1)", exampleQueue, q.Object["status"])
		}
		return nil
	})

	capacity.Store(true)
	if err := c.AddKwokNode(ctx(), "kwok-cpu-2", "32", "256Gi"); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, ns, job.Name, trainer.TrainJobCompletePhase, long)
	pw.finish(t)
	pods, err := jobPods(ns, job.Name)
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]bool{}
	for _, p := range pods {
		nodes[p.Spec.NodeName] = true
	}
	if len(pods) != 3 || len(nodes) != 3 || !nodes["kwok-cpu-2"] {
		t.Errorf("pods %s: want 3 on 3 nodes, kwok-cpu-2 among them", describe(byName(pods)))
	}
}

// twoGangsNeverSplit: two 2-node jobs on 3 nodes each fit alone, not
// together. Volcano runs one whole and keeps the other whole in wait (its
// TrainJob says why); no pod event ever shows one job whole and the other
// with a pod on the third node (2+1). Once the running job is deleted, the
// waiting one runs whole.
func twoGangsNeverSplit(t *testing.T) {
	ns := newNamespace(t)
	pw := watchPods(t, ns, func(pods map[string]corev1.Pod) error {
		n := activeByJob(pods)
		if (n["a"] == 2 && n["b"] > 0) || (n["b"] == 2 && n["a"] > 0) {
			return fmt.Errorf("jobs split across the nodes (a %d, b %d active): %s", n["a"], n["b"], describe(pods))
		}
		return nil
	})
	for _, name := range []string{"a", "b"} {
		job := exampleJob(t, ns, name, true)
		job.Spec.Trainer.NumNodes = ptr.To[int32](2)
		if err := cli.Create(ctx(), job); err != nil {
			t.Fatal(err)
		}
	}
	var running, waiting string
	waitFor(t, long, func() error {
		phases := map[string]trainer.TrainJobPhase{}
		for _, name := range []string{"a", "b"} {
			phases[name] = getJob(t, ns, name).Status.Phase
		}
		switch {
		case phases["a"] == trainer.TrainJobRunning && phases["b"] == trainer.TrainJobPending:
			running, waiting = "a", "b"
		case phases["b"] == trainer.TrainJobRunning && phases["a"] == trainer.TrainJobPending:
			running, waiting = "b", "a"
		default:
			return fmt.Errorf("phases %v, want one Running and one Pending", phases)
		}
		return nil
	})
	got := waitGangReason(t, ns, waiting)
	t.Logf("%s runs; %s waits: %s/%s: %s", running, waiting, got.Status.Phase, got.Status.Reason, got.Status.Message)
	pods, err := jobPods(ns, waiting)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			t.Errorf("pod %s of the waiting job is bound to %s", p.Name, p.Spec.NodeName)
		}
	}

	deleteJob(t, ns, running)
	waitPhase(t, ns, waiting, trainer.TrainJobRunning, long)
	pw.finish(t)
	pods, err = jobPods(ns, waiting)
	if err != nil {
		t.Fatal(err)
	}
	if n := activeByJob(byName(pods))[waiting]; len(pods) != 2 || n != 2 {
		t.Errorf("pods of %s: %s, want 2 running", waiting, describe(byName(pods)))
	}
}
