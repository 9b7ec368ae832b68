package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/localcluster"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/kueue"
)

// Kubeflow Trainer's own e2e scenarios (test/e2e/e2e_test.go upstream), as a
// user runs them against `make cluster-up`: kwok nodes, the real JobSet,
// Kueue and Job controllers. They mean something only because kwok's pods
// live as their commands say (pkg/localcluster/kwokstages/pod-complete.yaml):
// `sleep N` runs N seconds, an MPI node's sshd until its Job stops.

// jobStatus returns the TrainJob's jobsStatus entry of a replicated job.
func jobStatus(job *trainer.TrainJob, rjob string) (trainer.JobStatus, bool) {
	for _, s := range job.Status.JobsStatus {
		if s.Name == rjob {
			return s, true
		}
	}
	return trainer.JobStatus{}, false
}

// A DeepSpeed TrainJob of 2 nodes running `mpirun sleep 10`: within 90 s the
// node job shows active 1 in status.jobsStatus (its pod runs sshd until the
// JobSet ends), and the TrainJob completes once the launcher's 10 s are over.
// Before kwok followed commands the node pod completed after a few seconds,
// before (or without) a status write that showed it active.
func TestUpstreamDeepSpeedNodeActive(t *testing.T) {
	ns := newNamespace(t)
	job := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "e2e-test-deepspeed"},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: "deepspeed-distributed"},
			Trainer:    &trainer.Trainer{NumNodes: ptr.To[int32](2), Command: []string{"mpirun", "sleep", "10"}},
		},
	}
	if err := cli.Create(ctx(), job); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 90*time.Second, func() error {
		got := get(t, ns, job.Name)
		s, ok := jobStatus(got, "node")
		if !ok || ptr.Deref(s.Active, 0) != 1 {
			return fmt.Errorf("jobsStatus %+v: node not active 1", got.Status.JobsStatus)
		}
		return nil
	})
	done := waitState(t, ns, job.Name, trainer.TrainJobCompletePhase, "", long)
	checkConditions(t, done, upstreamCondition{trainer.TrainJobComplete, metav1.ConditionTrue, "AllJobsCompleted", "jobset completed successfully"})
	if s, _ := jobStatus(done, "launcher"); ptr.Deref(s.Succeeded, 0) != 1 {
		t.Errorf("launcher %+v, want 1 succeeded", s)
	}
	// The launcher ran its 10 s: the job cannot have completed sooner.
	if d := done.Status.CompletionTime.Sub(done.CreationTimestamp.Time); d < 10*time.Second {
		t.Errorf("completed %s after creation; the launcher's sleep 10 runs 10 s", d)
	}
}

// A TrainJob created with two runtime patches and no Kueue queue label keeps
// exactly those two: Kueue v0.17's TrainJob webhook adds a patch of manager
// kueue.x-k8s.io/manager to every TrainJob it sees on create, so the local
// cluster shows it only TrainJobs submitted to a queue
// (pkg/localcluster/kueuewebhooks.go). A queued TrainJob still gets Kueue's
// patch, which Kueue's TrainJob integration needs.
func TestUpstreamRuntimePatchesWithoutQueue(t *testing.T) {
	useKueueTrainJobIntegration(t)
	ns := newNamespace(t)
	userTime := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	saPatch := func(manager, sa string, at *metav1.Time) trainer.RuntimePatch {
		return trainer.RuntimePatch{Manager: manager, Time: at, TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{
			Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{
				Name: "node", Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{
					Template: &trainer.PodTemplatePatch{Spec: &trainer.PodSpecPatch{ServiceAccountName: ptr.To(sa)}}}},
			}}}},
		}}
	}
	job := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "e2e-test"},
		Spec: trainer.TrainJobSpec{
			RuntimeRef:     trainer.RuntimeRef{Name: "torch-distributed"},
			RuntimePatches: []trainer.RuntimePatch{saPatch("test.io/manager-one", "test-sa-1", &userTime), saPatch("kueue.k8s.io/manager", "test-sa-2", nil)},
		},
	}
	if err := cli.Create(ctx(), job); err != nil {
		t.Fatal(err)
	}
	var jss []jobsetv1alpha2.JobSet
	waitFor(t, short, func() error {
		if jss = jobSetsOf(t, get(t, ns, job.Name)); len(jss) != 1 {
			return fmt.Errorf("%d JobSets", len(jss))
		}
		return nil
	})
	got := get(t, ns, job.Name)
	var managers []string
	for _, p := range got.Spec.RuntimePatches {
		managers = append(managers, p.Manager)
	}
	if !slices.Equal(managers, []string{"test.io/manager-one", "kueue.k8s.io/manager"}) {
		t.Fatalf("runtime patches of managers %q, want exactly the two the TrainJob was created with", managers)
	}
	if p := got.Spec.RuntimePatches[0]; p.Time == nil || !p.Time.Equal(&userTime) {
		t.Errorf("test.io/manager-one's time %v, want the user's %v", p.Time, userTime)
	}
	if got.Spec.RuntimePatches[1].Time == nil {
		t.Error("kueue.k8s.io/manager's patch has no time")
	}

	// Submitted to a queue (one that does not exist here), Kueue's webhook
	// still adds its own patch and suspends the job.
	queued := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "queued", Labels: map[string]string{localcluster.KueueQueueLabel: "no-such-queue"}},
		Spec:       trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"}},
	}
	if err := cli.Create(ctx(), queued); err != nil {
		t.Fatal(err)
	}
	q := get(t, ns, queued.Name)
	if !ptr.Deref(q.Spec.Suspend, false) || len(q.Spec.RuntimePatches) != 1 || q.Spec.RuntimePatches[0].Manager != "kueue.x-k8s.io/manager" {
		t.Errorf("queued TrainJob: suspend %v, runtime patches %+v; want Kueue's patch and suspended", q.Spec.Suspend, q.Spec.RuntimePatches)
	}
}

// useKueueTrainJobIntegration makes sure Kueue runs with its TrainJob
// integration and the manager in the matching mode (TestKueue leaves the last
// mode it tried).
func useKueueTrainJobIntegration(t *testing.T) {
	t.Helper()
	if want := localcluster.KueueFrameworksFor(kueue.ModeTrainJob); !slices.Equal(c.KueueFrameworks(), want) {
		useKueue(t, want, kueue.ModeTrainJob)
	}
}

// activeDeadlineSeconds 10 on a trainer that runs `sh -c "sleep 600"` fails
// the TrainJob with DeadlineExceeded and removes its JobSet. Before kwok
// followed commands the pod completed within seconds, so the job was Complete
// before its deadline (or not, by chance).
func TestUpstreamDeadlineExceeded(t *testing.T) {
	ns := newNamespace(t)
	job := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "e2e-deadline-job"},
		Spec: trainer.TrainJobSpec{
			RuntimeRef:            trainer.RuntimeRef{Name: "torch-distributed"},
			ActiveDeadlineSeconds: ptr.To[int64](10),
			Trainer:               &trainer.Trainer{Image: ptr.To("busybox"), Command: []string{"/bin/sh", "-c", "sleep 600"}},
		},
	}
	if err := cli.Create(ctx(), job); err != nil {
		t.Fatal(err)
	}
	failed := waitState(t, ns, job.Name, trainer.TrainJobFailedPhase, trainer.TrainJobDeadlineExceededReason, long)
	checkConditions(t, failed, upstreamCondition{trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobDeadlineExceededReason, "TrainJob exceeded its active deadline"})
	waitFor(t, short, func() error {
		err := cli.Get(ctx(), client.ObjectKey{Namespace: ns, Name: job.Name}, &jobsetv1alpha2.JobSet{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("JobSet still there (err=%v)", err)
	})
}

// How long a Job's pod runs on a kwok node follows its command: `sleep N` N
// seconds (also through `sh -c`), an sshd until its Job is deleted, anything
// else a few seconds.
func TestKwokPodLife(t *testing.T) {
	ns := newNamespace(t)
	job := func(name string, command ...string) *batchv1.Job {
		return &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: batchv1.JobSpec{BackoffLimit: ptr.To[int32](0), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "c", Image: "busybox", Command: command}},
			}}},
		}
	}
	jobs := []*batchv1.Job{
		job("sleep", "sleep", "8"),
		job("shell", "/bin/sh", "-c", "exec sleep 8"),
		job("sshd", "/usr/sbin/sshd", "-De", "-f", "/etc/ssh/sshd_config"),
		job("other", "python3", "train.py"),
	}
	for _, j := range jobs {
		if err := cli.Create(ctx(), j); err != nil {
			t.Fatal(err)
		}
	}
	// runFor is how long the job's pod ran: from Ready to its container's end.
	runFor := func(name string) (time.Duration, bool, error) {
		var list corev1.PodList
		if err := cli.List(ctx(), &list, client.InNamespace(ns), client.MatchingLabels{"job-name": name}); err != nil {
			return 0, false, err
		}
		if len(list.Items) != 1 {
			return 0, false, fmt.Errorf("%d pods of Job %s", len(list.Items), name)
		}
		p := list.Items[0]
		var ready *corev1.PodCondition
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == corev1.PodReady {
				ready = &p.Status.Conditions[i]
			}
		}
		if p.Status.Phase != corev1.PodSucceeded || ready == nil || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Terminated == nil {
			return 0, false, nil
		}
		return p.Status.ContainerStatuses[0].State.Terminated.FinishedAt.Sub(ready.LastTransitionTime.Time), true, nil
	}
	for _, tc := range []struct {
		name     string
		min, max time.Duration
	}{
		{"other", 0, 7 * time.Second},
		{"sleep", 8 * time.Second, 10 * time.Second},
		{"shell", 8 * time.Second, 10 * time.Second},
	} {
		var d time.Duration
		waitFor(t, short, func() error {
			var done bool
			var err error
			if d, done, err = runFor(tc.name); err == nil && !done {
				err = fmt.Errorf("the pod of Job %s has not succeeded", tc.name)
			}
			return err
		})
		// Times are stamped to the second by kwok.
		if d < tc.min-time.Second || d > tc.max {
			t.Errorf("the pod of Job %s ran %s, want %s to %s", tc.name, d, tc.min, tc.max)
		}
	}
	// The server still runs, long after the others ended; it goes with its Job.
	var list corev1.PodList
	if err := cli.List(ctx(), &list, client.InNamespace(ns), client.MatchingLabels{"job-name": "sshd"}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Status.Phase != corev1.PodRunning {
		t.Fatalf("sshd pods %d, phase %v; want one Running", len(list.Items), phases(list.Items))
	}
	if err := cli.Delete(ctx(), jobs[2], client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, short, func() error {
		if err := cli.List(ctx(), &list, client.InNamespace(ns), client.MatchingLabels{"job-name": "sshd"}); err != nil {
			return err
		}
		if len(list.Items) > 0 {
			return fmt.Errorf("sshd pod still there: %v", phases(list.Items))
		}
		return nil
	})
}

func phases(ps []corev1.Pod) []corev1.PodPhase {
	var out []corev1.PodPhase
	for _, p := range ps {
		out = append(out, p.Status.Phase)
	}
	return out
}

// numNodes 0 (Kubeflow Trainer v2.4) runs no training pod: the JobSet's
// trainer job has parallelism and completions 0, Kubernetes completes its Job
// at once, and the TrainJob is Complete without a pod.
func TestNumNodesZero(t *testing.T) {
	ns := newNamespace(t)
	job := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "none"},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"},
			Trainer:    &trainer.Trainer{NumNodes: ptr.To[int32](0), Command: []string{"sleep", "600"}},
		},
	}
	if err := cli.Create(ctx(), job); err != nil {
		t.Fatal(err)
	}
	done := waitState(t, ns, job.Name, trainer.TrainJobCompletePhase, "", long)
	checkConditions(t, done, upstreamCondition{trainer.TrainJobComplete, metav1.ConditionTrue, "AllJobsCompleted", "jobset completed successfully"})
	var js jobsetv1alpha2.JobSet
	if err := cli.Get(ctx(), client.ObjectKeyFromObject(job), &js); err != nil {
		t.Fatal(err)
	}
	if rj := js.Spec.ReplicatedJobs[0]; ptr.Deref(rj.Template.Spec.Parallelism, -1) != 0 || ptr.Deref(rj.Template.Spec.Completions, -1) != 0 {
		t.Errorf("trainer job parallelism %v, completions %v; want 0 and 0", rj.Template.Spec.Parallelism, rj.Template.Spec.Completions)
	}
	if n := len(pods(t, ns, job.Name)); n != 0 {
		t.Errorf("%d pods for a TrainJob of 0 nodes", n)
	}
	if ptr.Deref(done.Status.NumNodes, -1) != 0 {
		t.Errorf("status.numNodes %v, want 0", done.Status.NumNodes)
	}
}

// Failed is terminal (Kubeflow Trainer v2.4): a TrainJob whose JobSet failed
// and was deleted at once by its own ttlSecondsAfterFinished: 0 stays Failed
// with the JobSet's reason and never gets a new JobSet.
func TestFailedIsTerminal(t *testing.T) {
	ns := newNamespace(t)
	failFastRuntime(t, ns)
	var rt trainer.TrainingRuntime
	if err := cli.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "torch-fail-fast"}, &rt); err != nil {
		t.Fatal(err)
	}
	rt.Spec.Template.Spec.TTLSecondsAfterFinished = ptr.To[int32](0)
	if err := cli.Update(ctx(), &rt); err != nil {
		t.Fatal(err)
	}
	job := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "crash"},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: "torch-fail-fast", Kind: ptr.To(trainer.TrainingRuntimeKind)},
			Trainer:    &trainer.Trainer{NumNodes: ptr.To[int32](1)},
		},
	}
	withPods(job, map[string]string{failLabel: "true"}, nil)
	if err := cli.Create(ctx(), job); err != nil {
		t.Fatal(err)
	}
	first := waitState(t, ns, job.Name, trainer.TrainJobFailedPhase, "", long)
	if first.Status.Reason == trainer.TrainJobDeadlineExceededReason {
		t.Fatalf("failed for %s, want the JobSet's reason", first.Status.Reason)
	}
	uid := first.UID
	waitFor(t, short, func() error { // JobSet's TTL deleted it
		err := cli.Get(ctx(), client.ObjectKeyFromObject(job), &jobsetv1alpha2.JobSet{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("JobSet still there (err=%v)", err)
	})
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var list jobsetv1alpha2.JobSetList
		if err := cli.List(ctx(), &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		if len(list.Items) > 0 {
			t.Fatalf("a new JobSet %s (uid %s) for the failed TrainJob %s", list.Items[0].Name, list.Items[0].UID, uid)
		}
		got := get(t, ns, job.Name)
		if got.Status.Phase != trainer.TrainJobFailedPhase {
			t.Fatalf("TrainJob left Failed: %s/%s", got.Status.Phase, got.Status.Reason)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
