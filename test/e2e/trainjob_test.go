package e2e

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// The example TrainJob, applied unchanged on the shipped runtime, runs its two
// nodes through the real JobSet and Job controllers and the scheduler to Complete.
func TestTwoNodeTrainJobCompletes(t *testing.T) {
	ns := newNamespace(t)
	job := loadTrainJob(t, "examples/trainjob-torch.yaml", ns, "")
	if err := cli.Create(ctx(), job); err != nil {
		t.Fatal(err)
	}
	waitState(t, ns, job.Name, trainer.TrainJobRunning, "AllNodesStarted", long)
	ps := pods(t, ns, job.Name)
	if len(ps) != 2 {
		t.Fatalf("want 2 node pods, got %d", len(ps))
	}
	for _, p := range ps {
		if p.Spec.NodeName == "" {
			t.Errorf("pod %s not scheduled", p.Name)
		}
		if p.Spec.Hostname == "" || p.Spec.Subdomain != job.Name {
			t.Errorf("pod %s: hostname %q subdomain %q: master address would not resolve", p.Name, p.Spec.Hostname, p.Spec.Subdomain)
		}
	}
	done := waitState(t, ns, job.Name, trainer.TrainJobCompletePhase, "", long)
	if done.Status.CompletionTime == nil || done.Status.StartTime == nil {
		t.Errorf("start/completion time not set: %+v", done.Status)
	}
	// Upstream's conditions of a completed TrainJob, exactly.
	checkConditions(t, done, upstreamCondition{trainer.TrainJobComplete, metav1.ConditionTrue, "AllJobsCompleted", "jobset completed successfully"})
}

// upstreamCondition is what tools compare of a TrainJob's conditions with
// Kubeflow Trainer's: type, status, reason and message.
type upstreamCondition struct {
	Type    string
	Status  metav1.ConditionStatus
	Reason  string
	Message string
}

// checkConditions compares the whole list of a TrainJob's conditions with
// upstream's (Kubeflow Trainer sets only Suspended, Complete and Failed).
func checkConditions(t *testing.T, job *trainer.TrainJob, want ...upstreamCondition) {
	t.Helper()
	var got []upstreamCondition
	for _, c := range job.Status.Conditions {
		got = append(got, upstreamCondition{c.Type, c.Status, c.Reason, c.Message})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("TrainJob %s conditions (-upstream +got):\n%s", job.Name, diff)
	}
}

// failFastRuntime is the shipped runtime with no retries, so that a failing node
// fails the job at once.
func failFastRuntime(t *testing.T, ns string) {
	t.Helper()
	rt := &trainer.TrainingRuntime{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "torch-fail-fast", Labels: map[string]string{trainer.FrameworkLabel: "torch"}},
		Spec: trainer.TrainingRuntimeSpec{
			MLPolicy: &trainer.MLPolicy{NumNodes: ptr.To[int32](1), MLPolicySource: trainer.MLPolicySource{Torch: &trainer.TorchMLPolicySource{}}},
			Template: trainer.JobSetTemplateSpec{Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{
				Name: "node",
				Template: batchv1.JobTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{trainer.AncestorLabel: trainer.AncestorTrainer}},
					Spec: batchv1.JobSpec{BackoffLimit: ptr.To[int32](0), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
						RestartPolicy: corev1.RestartPolicyNever,
						Containers:    []corev1.Container{{Name: "node", Image: "example.com/train:v1"}},
					}}},
				},
			}}}},
		},
	}
	if err := cli.Create(ctx(), rt); err != nil {
		t.Fatal(err)
	}
}

// A node that fails fails the JobSet, and the TrainJob says Failed with the
// JobSet's reason.
func TestFailingNodeFailsTrainJob(t *testing.T) {
	ns := newNamespace(t)
	failFastRuntime(t, ns)
	job := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "crash"},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: "torch-fail-fast", Kind: ptr.To(trainer.TrainingRuntimeKind)},
			Trainer:    &trainer.Trainer{NumNodes: ptr.To[int32](2)},
		},
	}
	withPods(job, map[string]string{failLabel: "true"}, nil)
	if err := cli.Create(ctx(), job); err != nil {
		t.Fatal(err)
	}
	failed := waitState(t, ns, "crash", trainer.TrainJobFailedPhase, "", long)
	var js jobsetv1alpha2.JobSet
	if err := cli.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "crash"}, &js); err != nil {
		t.Fatal(err)
	}
	jsFailed := meta.FindStatusCondition(js.Status.Conditions, string(jobsetv1alpha2.JobSetFailed))
	if jsFailed == nil || failed.Status.Reason != jsFailed.Reason || failed.Status.Message != jsFailed.Message {
		t.Fatalf("TrainJob failed with %s: %q; JobSet says %+v", failed.Status.Reason, failed.Status.Message, jsFailed)
	}
	t.Logf("failed: %s: %s", failed.Status.Reason, failed.Status.Message)
	checkConditions(t, failed, upstreamCondition{trainer.TrainJobFailed, metav1.ConditionTrue, jsFailed.Reason, jsFailed.Message})
}

// Suspending a running job removes its pods; resuming runs it to Complete.
func TestSuspendResume(t *testing.T) {
	ns := newNamespace(t)
	job := runFor(loadTrainJob(t, "examples/trainjob-torch.yaml", ns, "pausable"), 20*time.Second)
	if err := cli.Create(ctx(), job); err != nil {
		t.Fatal(err)
	}
	waitState(t, ns, job.Name, trainer.TrainJobRunning, "", long)
	patchJob(t, ns, job.Name, func(j *trainer.TrainJob) { j.Spec.Suspend = ptr.To(true) })
	suspended := waitState(t, ns, job.Name, trainer.TrainJobSuspendedPhase, "Suspended", short)
	checkConditions(t, suspended, upstreamCondition{trainer.TrainJobSuspended, metav1.ConditionTrue, "Suspended", "TrainJob is suspended"})
	waitFor(t, short, func() error {
		if n := len(pods(t, ns, job.Name)); n != 0 {
			return fmt.Errorf("%d pods still exist while suspended", n)
		}
		return nil
	})
	patchJob(t, ns, job.Name, func(j *trainer.TrainJob) { j.Spec.Suspend = ptr.To(false) })
	resumed := waitState(t, ns, job.Name, trainer.TrainJobRunning, "", long)
	checkConditions(t, resumed, upstreamCondition{trainer.TrainJobSuspended, metav1.ConditionFalse, "Resumed", "TrainJob is resumed"})
	done := waitState(t, ns, job.Name, trainer.TrainJobCompletePhase, "", long)
	checkConditions(t, done,
		upstreamCondition{trainer.TrainJobSuspended, metav1.ConditionFalse, "Resumed", "TrainJob is resumed"},
		upstreamCondition{trainer.TrainJobComplete, metav1.ConditionTrue, "AllJobsCompleted", "jobset completed successfully"})
}

// Deleting a TrainJob deletes its JobSet, Jobs and pods.
func TestDeleteCollectsEverything(t *testing.T) {
	ns := newNamespace(t)
	job := runFor(loadTrainJob(t, "examples/trainjob-torch.yaml", ns, "doomed"), time.Minute)
	if err := cli.Create(ctx(), job); err != nil {
		t.Fatal(err)
	}
	waitState(t, ns, job.Name, trainer.TrainJobRunning, "", long)
	if err := cli.Delete(ctx(), job, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, long, func() error {
		if err := cli.Get(ctx(), client.ObjectKey{Namespace: ns, Name: job.Name}, &jobsetv1alpha2.JobSet{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("JobSet still exists (%v)", err)
		}
		var jobs batchv1.JobList
		if err := cli.List(ctx(), &jobs, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(jobs.Items) > 0 {
			return fmt.Errorf("%d Jobs still exist", len(jobs.Items))
		}
		if n := len(pods(t, ns, job.Name)); n > 0 {
			return fmt.Errorf("%d pods still exist", n)
		}
		return nil
	})
}

// The manager killed (SIGKILL) in the middle of a run and restarted leaves
// exactly the one JobSet, and the job still completes.
func TestManagerKilledMidRun(t *testing.T) {
	ns := newNamespace(t)
	job := runFor(loadTrainJob(t, "examples/trainjob-torch.yaml", ns, "survivor"), 25*time.Second)
	if err := cli.Create(ctx(), job); err != nil {
		t.Fatal(err)
	}
	running := waitState(t, ns, job.Name, trainer.TrainJobRunning, "", long)
	before := jobSetsOf(t, running)
	if err := c.StopManager(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := c.StartManager(ctx()); err != nil {
		t.Fatal(err)
	}
	done := waitState(t, ns, job.Name, trainer.TrainJobCompletePhase, "", long)
	after := jobSetsOf(t, done)
	if len(before) != 1 || len(after) != 1 || before[0].UID != after[0].UID {
		t.Fatalf("JobSets before the kill %d, after %d (want the same one)", len(before), len(after))
	}
}
