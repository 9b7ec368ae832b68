package coscheduling

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/coscheduling"
)

// Without a podGroupPolicy the same 3-node job on room for 2 starts partially:
// the scheduler binds 2 pods and leaves the third Pending. This is what the
// gang (TestGangWaitsForCapacity) prevents.
func TestNoGangStartsPartially(t *testing.T) {
	setNodes(t, 2)
	gangRuntime(t, "torch-no-gang", func(rt *trainer.ClusterTrainingRuntime) { rt.Spec.PodGroupPolicy = nil })
	ns := newNamespace(t)
	create(t, trainJob(t, ns, "partial", "torch-no-gang", 3, podCPU, time.Hour))

	waitFor(t, long, func() error {
		ps := pods(t, ns, "partial")
		if len(ps) != 3 || bound(ps) != 2 || len(unschedulable(ps)) != 1 {
			return fmt.Errorf("%d pods, %d bound, unschedulable: %v", len(ps), bound(ps), unschedulable(ps))
		}
		return nil
	})
	for _, p := range pods(t, ns, "partial") {
		if _, ok := p.Labels["scheduling.x-k8s.io/pod-group"]; ok {
			t.Errorf("pod %s has a pod-group label without a podGroupPolicy", p.Name)
		}
	}
}

// A 3-node gang on room for 2 binds no pod, and the TrainJob says why (its
// PodGroup and the scheduler's reason); a third node lets all 3 bind together
// and the job completes.
func TestGangWaitsForCapacity(t *testing.T) {
	setNodes(t, 2)
	ns := newNamespace(t)
	// Until the third node exists, no pod may be bound.
	var capacity3 atomic.Bool
	w := watchBindings(t, ns, func(byJob map[string][]corev1.Pod) string {
		if n := bound(byJob["gang"]); n > 0 && !capacity3.Load() {
			return fmt.Sprintf("%d of 3 pods bound with room for 2", n)
		}
		return ""
	})
	create(t, trainJob(t, ns, "gang", runtimeName, 3, podCPU, 5*time.Second))

	// The PodGroup is Pending until all 3 pods exist, then Scheduling: the
	// scheduler has tried the whole gang, and the pod that did not fit says why.
	// The pods it released with the gang say only that (a sibling rejection),
	// and the status must prefer the pod that says why. The scheduler can also
	// leave a release message on every pod, for minutes, while it retries the
	// gang (it skips writing "Insufficient cpu" again when its queued copy of
	// the pod still has it; docs/gang-scheduling.md): then there is no why to
	// show, and the status quotes the release.
	want := "PodGroup gang is Scheduling: 0/3 pods scheduled; pod gang-node-"
	job := waitStatus(t, ns, "gang", long, func(s *trainer.TrainJobStatus) error {
		if s.Phase != trainer.TrainJobPending || s.Reason != "PodGroupScheduling" || !strings.HasPrefix(s.Message, want) {
			return fmt.Errorf("want Pending/PodGroupScheduling, the message starting with %q", want)
		}
		if strings.Contains(s.Message, "Insufficient cpu") {
			return nil
		}
		msgs := unschedulable(pods(t, ns, "gang"))
		for _, m := range msgs {
			if !coscheduling.SiblingRejection(m) {
				return fmt.Errorf("want the message of a pod that says why; the pods say %q", msgs)
			}
		}
		if len(msgs) != 3 || !coscheduling.SiblingRejection(s.Message) {
			return fmt.Errorf("want Insufficient cpu, or a release message while every pod has one; the pods say %q", msgs)
		}
		t.Logf("every pod of the gang says only that it was released with it: %q", msgs)
		return nil
	})
	t.Logf("waiting: %s: %s", job.Status.Reason, job.Status.Message)
	ps := pods(t, ns, "gang")
	if len(ps) != 3 || bound(ps) != 0 {
		t.Fatalf("%d pods, %d bound; want 3, none bound", len(ps), bound(ps))
	}
	pg := podGroup(t, ns, "gang")
	if got, _, _ := unstructured.NestedInt64(pg.Object, "spec", "minMember"); got != 3 {
		t.Errorf("PodGroup minMember %d, want 3", got)
	}
	w.sawSamples(t)

	capacity3.Store(true)
	w.sawSamples(t)
	if err := c.AddKwokNode(ctx(), "kwok-cpu-2", nodeCPU, "256Gi"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, long, func() error {
		if ps := pods(t, ns, "gang"); bound(ps) != 3 {
			return fmt.Errorf("%d of %d pods bound", bound(ps), len(ps))
		}
		return nil
	})
	waitStatus(t, ns, "gang", long, phase(trainer.TrainJobCompletePhase))
	w.finish(t)
}

// Two 2-node gangs on room for 3 pods: each fits alone, not together. One runs
// whole, the other waits whole (never 2+1); once the first is gone the second
// runs whole.
func TestGangsNeverSplitCapacity(t *testing.T) {
	setNodes(t, 3)
	ns := newNamespace(t)
	// While one job has both pods running, the other has none bound (but for
	// pods being deleted, which the scheduler no longer counts).
	w := watchBindings(t, ns, func(byJob map[string][]corev1.Pod) string {
		for first, second := range map[string]string{"first": "second", "second": "first"} {
			if running(byJob[first]) == 2 && running(byJob[second]) > 0 {
				return fmt.Sprintf("%s runs and %s has %d pod(s) bound", first, second, running(byJob[second]))
			}
		}
		return ""
	})
	create(t, trainJob(t, ns, "first", runtimeName, 2, podCPU, time.Hour), trainJob(t, ns, "second", runtimeName, 2, podCPU, time.Hour))

	// Whichever the scheduler places first runs; the other waits, saying why.
	var winner, loser string
	waitFor(t, long, func() error {
		for _, name := range []string{"first", "second"} {
			if get(t, ns, name).Status.Phase == trainer.TrainJobRunning {
				winner = name
				return nil
			}
		}
		return fmt.Errorf("neither job runs")
	})
	loser = map[string]string{"first": "second", "second": "first"}[winner]
	waiting := waitStatus(t, ns, loser, long, func(s *trainer.TrainJobStatus) error {
		if s.Phase != trainer.TrainJobPending || !strings.HasPrefix(s.Reason, "PodGroup") || !strings.Contains(s.Message, "pod "+loser+"-node-") {
			return fmt.Errorf("want Pending for the PodGroup, with the scheduler's reason")
		}
		return nil
	})
	t.Logf("%s runs; %s waits: %s: %s", winner, loser, waiting.Status.Reason, waiting.Status.Message)
	if ps := pods(t, ns, winner); bound(ps) != 2 {
		t.Fatalf("%s: %d pods bound, want 2", winner, bound(ps))
	}
	if ps := pods(t, ns, loser); len(ps) != 2 || bound(ps) != 0 {
		t.Fatalf("%s: %d pods, %d bound; want 2, none bound", loser, len(ps), bound(ps))
	}
	w.sawSamples(t)

	// The running job goes: the waiting one takes its place, whole.
	if err := cli.Delete(ctx(), get(t, ns, winner)); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, ns, loser, long, phase(trainer.TrainJobRunning))
	if ps := pods(t, ns, loser); bound(ps) != 2 {
		t.Errorf("%s runs with %d pods bound, want 2", loser, bound(ps))
	}
	w.finish(t)
}

// running counts the bound pods that are neither finished nor being deleted.
func running(ps []corev1.Pod) int {
	n := 0
	for _, p := range ps {
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			n++
		}
	}
	return n
}

// The scheduleTimeoutSeconds path. A 10-node gang of 9-CPU pods on 3 nodes:
// the cluster has the CPUs in total (the plugin's PreFilter check passes) but
// only 9 pods fit. The scheduler places 9, which wait at Permit; the tenth
// does not fit, and as 1 of 10 (10%) is within podGroupRejectPercentage the
// 9 keep waiting until the PodGroup's scheduleTimeoutSeconds runs out. Then
// all are rejected and none is bound; the TrainJob shows the timeout, and
// with a fourth node the gang binds whole and completes.
func TestGangScheduleTimeout(t *testing.T) {
	setNodes(t, 3)
	const timeout = 5
	gangRuntime(t, "torch-gang-timeout", func(rt *trainer.ClusterTrainingRuntime) {
		rt.Spec.PodGroupPolicy.Coscheduling.ScheduleTimeoutSeconds = ptr.To[int32](timeout)
	})
	ns := newNamespace(t)
	var capacity atomic.Bool
	w := watchBindings(t, ns, func(byJob map[string][]corev1.Pod) string {
		if n := bound(byJob["timeout"]); n > 0 && !capacity.Load() {
			return fmt.Sprintf("%d of 10 pods bound with room for 9", n)
		}
		return ""
	})
	create(t, trainJob(t, ns, "timeout", "torch-gang-timeout", 10, "9", 5*time.Second))

	rejected := fmt.Sprintf("rejected due to timeout after waiting %ds at plugin Coscheduling", timeout)
	job := waitStatus(t, ns, "timeout", long, func(s *trainer.TrainJobStatus) error {
		if s.Phase != trainer.TrainJobPending || !strings.Contains(s.Message, rejected) {
			return fmt.Errorf("want Pending with %q", rejected)
		}
		return nil
	})
	t.Logf("timed out: %s: %s", job.Status.Reason, job.Status.Message)
	if got, _, _ := unstructured.NestedInt64(podGroup(t, ns, "timeout").Object, "spec", "scheduleTimeoutSeconds"); got != timeout {
		t.Errorf("PodGroup scheduleTimeoutSeconds %d, want %d", got, timeout)
	}
	if ps := pods(t, ns, "timeout"); bound(ps) != 0 {
		t.Fatalf("%d pods bound after the timeout, want none", bound(ps))
	}
	w.sawSamples(t)

	capacity.Store(true)
	w.sawSamples(t)
	if err := c.AddKwokNode(ctx(), "kwok-cpu-3", nodeCPU, "256Gi"); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, ns, "timeout", long, phase(trainer.TrainJobCompletePhase))
	if ps := pods(t, ns, "timeout"); bound(ps) != 10 {
		t.Errorf("%d pods bound, want 10", bound(ps))
	}
	w.finish(t)
}
