package e2e

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/localcluster"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/kueue"
)

// kueueModes are the two ways Kueue can queue TrainJobs, with the Kueue
// integrations and the manager flag each needs.
var kueueModes = []struct {
	name       string
	frameworks []string
	mode       kueue.Mode
}{
	{"TrainJob integration enabled", localcluster.KueueFrameworksFor(kueue.ModeTrainJob), kueue.ModeTrainJob},
	{"TrainJob integration disabled", localcluster.KueueFrameworksFor(kueue.ModeJobSet), kueue.ModeJobSet},
}

// TestKueue runs the gang scenarios through the real Kueue, once per setup. The
// queue is examples/kueue/queues.yaml, applied unchanged: a ClusterQueue of 4
// GPUs (flavor gpu → nodes labelled trainyard.io/pool=gpu) and LocalQueue
// gpu-queue in the default namespace; the jobs are examples/kueue/trainjob-gpu.yaml,
// 2 nodes × 2 GPUs.
func TestKueue(t *testing.T) {
	if err := c.ApplyFile(ctx(), repoFile("examples/kueue/queues.yaml")); err != nil {
		t.Fatal(err)
	}
	for _, m := range kueueModes {
		t.Run(m.name, func(t *testing.T) {
			useKueue(t, m.frameworks, m.mode)
			t.Run("one gang waits for quota", func(t *testing.T) { gangQueueing(t, m.mode) })
			t.Run("a job that can never fit says so", func(t *testing.T) { neverFits(t) })
			t.Run("higher priority preempts", func(t *testing.T) { preemption(t, m.mode) })
			waitNoWorkloads(t, queueNS)
		})
	}
}

// useKueue restarts Kueue with these integrations and the manager with the
// matching --kueue-mode.
func useKueue(t *testing.T, frameworks []string, mode kueue.Mode) {
	t.Helper()
	if err := c.RestartKueue(ctx(), frameworks); err != nil {
		t.Fatal(err)
	}
	c.SetManagerArgs([]string{"--kueue-mode=" + string(mode)})
	if err := c.StopManager(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := c.StartManager(ctx()); err != nil {
		t.Fatal(err)
	}
}

const queueNS = "default" // where examples/kueue/queues.yaml puts the LocalQueue

// waitNoWorkloads waits until the deleted jobs of a mode have taken their
// Workloads with them. Kueue removes a Workload's finalizer through the
// integration that made it: restarted for the next mode, with that integration
// off, before it had, it would keep the Workload admitted for ever, holding the
// queue's quota (seen with Kueue v0.17.1: trainjob-prio-low-... stayed admitted
// and the next mode's jobs waited for 4 GPUs).
func waitNoWorkloads(t *testing.T, ns string) {
	t.Helper()
	waitFor(t, long, func() error {
		var l unstructured.UnstructuredList
		l.SetAPIVersion("kueue.x-k8s.io/v1beta2")
		l.SetKind("WorkloadList")
		if err := cli.List(ctx(), &l, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(l.Items) > 0 {
			return fmt.Errorf("%d Workloads left in %s, e.g. %s", len(l.Items), ns, l.Items[0].GetName())
		}
		return nil
	})
}

func gpuJob(t *testing.T, name, priority string, run time.Duration) *trainer.TrainJob {
	job := runFor(loadTrainJob(t, "examples/kueue/trainjob-gpu.yaml", queueNS, name), run)
	job.Labels[kueue.PriorityClassLabel] = priority
	t.Cleanup(func() { _ = cli.Delete(ctx(), job, client.PropagationPolicy("Background")) })
	return job
}

// Two 2×2-GPU jobs on a 4-GPU queue: the first runs, all its pods on GPU nodes;
// the second waits, as a whole, with Kueue's reason; it runs once the first is done.
func gangQueueing(t *testing.T, mode kueue.Mode) {
	first, second := gpuJob(t, "gang-first", "low", 15*time.Second), gpuJob(t, "gang-second", "low", time.Second)
	if err := cli.Create(ctx(), first); err != nil {
		t.Fatal(err)
	}
	waitState(t, queueNS, first.Name, trainer.TrainJobRunning, "", long)
	if err := cli.Create(ctx(), second); err != nil {
		t.Fatal(err)
	}
	waitState(t, queueNS, second.Name, trainer.TrainJobPending, "WaitingForQuota", short)
	// The job is WaitingForQuota from the moment its Workload exists ("queued
	// in LocalQueue …"); Kueue's reason follows once Kueue has tried to admit it.
	waitFor(t, short, func() error {
		var job trainer.TrainJob
		if err := cli.Get(ctx(), client.ObjectKeyFromObject(second), &job); err != nil {
			return err
		}
		if job.Status.Reason != "WaitingForQuota" || !strings.Contains(job.Status.Message, "insufficient unused quota for nvidia.com/gpu in flavor gpu") {
			return fmt.Errorf("want WaitingForQuota with Kueue's quota message, got %s: %q", job.Status.Reason, job.Status.Message)
		}
		return nil
	})
	if n := len(pods(t, queueNS, second.Name)); n != 0 {
		t.Errorf("the waiting job has %d pods: the gang was split", n)
	}
	for _, p := range pods(t, queueNS, first.Name) {
		if p.Spec.NodeSelector[localcluster.PoolLabel] != "gpu" {
			t.Errorf("pod %s: nodeSelector %v, want the gpu flavor's", p.Name, p.Spec.NodeSelector)
		}
		if q := p.Spec.Containers[0].Resources.Requests[localcluster.GPUResource]; q.Cmp(resource.MustParse("2")) != 0 {
			t.Errorf("pod %s requests %s GPUs, want 2", p.Name, q.String())
		}
	}
	waitState(t, queueNS, first.Name, trainer.TrainJobCompletePhase, "", long)
	waitState(t, queueNS, second.Name, trainer.TrainJobCompletePhase, "", long)
	checkQueueLabels(t, second, mode)
}

// checkQueueLabels: in jobset mode the JobSet carries the queue; in trainjob
// mode it must not, or Kueue would queue the job twice.
func checkQueueLabels(t *testing.T, job *trainer.TrainJob, mode kueue.Mode) {
	t.Helper()
	var js jobsetv1alpha2.JobSet
	if err := cli.Get(ctx(), client.ObjectKeyFromObject(job), &js); err != nil {
		t.Fatal(err)
	}
	_, has := js.Labels[kueue.QueueNameLabel]
	if has != (mode == kueue.ModeJobSet) {
		t.Errorf("mode %s: JobSet queue label present=%v", mode, has)
	}
}

// 2 nodes × 4 GPUs can never fit a 4-GPU ClusterQueue.
func neverFits(t *testing.T) {
	job := gpuJob(t, "too-big", "low", time.Second)
	job.Spec.Trainer.ResourcesPerNode.Limits["nvidia.com/gpu"] = resource.MustParse("4")
	if err := cli.Create(ctx(), job); err != nil {
		t.Fatal(err)
	}
	got := waitState(t, queueNS, job.Name, trainer.TrainJobPending, "ExceedsQueueCapacity", short)
	if !strings.Contains(got.Status.Message, "> maximum capacity") {
		t.Errorf("message %q", got.Status.Message)
	}
}

// A high-priority job preempts a running low-priority one, which is suspended,
// then resumes and completes after the high-priority job.
func preemption(t *testing.T, mode kueue.Mode) {
	low, high := gpuJob(t, "prio-low", "low", 20*time.Second), gpuJob(t, "prio-high", "high", 5*time.Second)
	if err := cli.Create(ctx(), low); err != nil {
		t.Fatal(err)
	}
	waitState(t, queueNS, low.Name, trainer.TrainJobRunning, "", long)
	running := pods(t, queueNS, low.Name)
	if err := cli.Create(ctx(), high); err != nil {
		t.Fatal(err)
	}
	preempted := waitState(t, queueNS, low.Name, trainer.TrainJobPending, "Preempted", short)
	if mode == kueue.ModeTrainJob && !ptr.Deref(preempted.Spec.Suspend, false) {
		t.Errorf("Kueue's TrainJob integration should have suspended the TrainJob")
	}
	// Its pods go: each one the job ran before the preemption is terminating or
	// gone. (kwok takes a few seconds to remove a terminating pod, and Kueue may
	// re-admit the job before, so "no pods at all" is not a stable observation.)
	waitFor(t, short, func() error {
		for _, p := range running {
			var cur corev1.Pod
			err := cli.Get(ctx(), client.ObjectKeyFromObject(&p), &cur)
			if err == nil && cur.UID == p.UID && cur.DeletionTimestamp == nil {
				return fmt.Errorf("pod %s of the preempted job is still running", p.Name)
			}
		}
		return nil
	})
	waitState(t, queueNS, high.Name, trainer.TrainJobCompletePhase, "", long)
	waitState(t, queueNS, low.Name, trainer.TrainJobRunning, "", long)
	waitState(t, queueNS, low.Name, trainer.TrainJobCompletePhase, "", long)
	if n := len(jobSetsOf(t, get(t, queueNS, low.Name))); n != 1 {
		t.Errorf("preempted job has %d JobSets", n)
	}
}
