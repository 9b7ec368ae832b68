package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/test/integration/framework"
)

func patchTrainJob(t *testing.T, ns, name string, mutate func(*trainer.TrainJob)) {
	t.Helper()
	eventually(t, func() error {
		job := &trainer.TrainJob{}
		if err := env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, job); err != nil {
			return err
		}
		mutate(job)
		return env.Client.Update(ctx(), job)
	})
}

func waitJobSetSuspended(t *testing.T, ns, name string, suspended bool) *jobsetv1alpha2.JobSet {
	t.Helper()
	var js jobsetv1alpha2.JobSet
	eventually(t, func() error {
		if err := env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, &js); err != nil {
			return err
		}
		if ptr.Deref(js.Spec.Suspend, false) != suspended {
			return fmt.Errorf("JobSet suspend=%v, want %v", ptr.Deref(js.Spec.Suspend, false), suspended)
		}
		return nil
	})
	return &js
}

// Suspending stops the JobSet; admission-style changes made while suspended
// (what Kueue writes) reach the JobSet; resuming starts it again with them.
func TestSuspendResume(t *testing.T) {
	ns := newNamespace(t)
	applyFile(t, ns, "runtimes/torch-distributed.yaml")
	require.NoError(t, env.Client.Create(ctx(), torchJob(ns, "sr", nil)))
	first := waitJobSetSuspended(t, ns, "sr", false)

	patchTrainJob(t, ns, "sr", func(j *trainer.TrainJob) { j.Spec.Suspend = ptr.To(true) })
	waitJobSetSuspended(t, ns, "sr", true)
	waitCondition(t, ns, "sr", trainer.TrainJobSuspended, metav1.ConditionTrue, trainer.TrainJobSuspendedReason)
	waitPhase(t, ns, "sr", trainer.TrainJobSuspendedPhase)

	// While suspended: a queue assigns a flavor (node selector, toleration, pod label).
	patchTrainJob(t, ns, "sr", func(j *trainer.TrainJob) {
		j.Spec.PodTemplateOverrides = []trainer.PodTemplateOverride{{
			TargetJobs: []trainer.PodTemplateOverrideTargetJob{{Name: "node"}},
			Metadata:   &metav1.ObjectMeta{Labels: map[string]string{"kueue.x-k8s.io/podset": "node"}},
			Spec: &trainer.PodTemplateSpecOverride{
				NodeSelector: map[string]string{"pool": "gpu-a"},
				Tolerations:  []corev1.Toleration{{Key: "pool", Operator: corev1.TolerationOpExists}},
			},
		}}
	})
	eventually(t, func() error {
		var js jobsetv1alpha2.JobSet
		if err := env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "sr"}, &js); err != nil {
			return err
		}
		if got := js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.NodeSelector["pool"]; got != "gpu-a" {
			return fmt.Errorf("nodeSelector pool=%q", got)
		}
		return nil
	})

	patchTrainJob(t, ns, "sr", func(j *trainer.TrainJob) { j.Spec.Suspend = ptr.To(false) })
	js := waitJobSetSuspended(t, ns, "sr", false)
	waitCondition(t, ns, "sr", trainer.TrainJobSuspended, metav1.ConditionFalse, trainer.TrainJobResumedReason)
	waitPhase(t, ns, "sr", trainer.TrainJobPending)
	pod := js.Spec.ReplicatedJobs[0].Template.Spec.Template
	require.Equal(t, "gpu-a", pod.Spec.NodeSelector["pool"])
	require.Equal(t, "node", pod.Labels["kueue.x-k8s.io/podset"])
	require.Equal(t, first.UID, js.UID, "the JobSet is updated in place, not recreated")
}

// Editing a runtime after a TrainJob got its JobSet changes nothing for that job,
// not even when it is re-rendered on resume; new TrainJobs see the edit.
func TestRuntimeEditsDoNotLeak(t *testing.T) {
	ns := newNamespace(t)
	rt := &trainer.TrainingRuntime{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rt"},
		Spec: trainer.TrainingRuntimeSpec{
			MLPolicy: &trainer.MLPolicy{NumNodes: ptr.To[int32](1), MLPolicySource: trainer.MLPolicySource{Torch: &trainer.TorchMLPolicySource{}}},
			Template: trainer.JobSetTemplateSpec{Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{
				Name: "node",
				Template: batchJobTemplate(corev1.Container{Name: "node", Image: "example.com/base:v1",
					Env: []corev1.EnvVar{{Name: "RUNTIME_VERSION", Value: "1"}}}),
			}}}},
		},
	}
	require.NoError(t, env.Client.Create(ctx(), rt))
	old := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "old"},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: "rt", Kind: ptr.To(trainer.TrainingRuntimeKind)},
			Suspend:    ptr.To(true),
		},
	}
	require.NoError(t, env.Client.Create(ctx(), old))
	waitJobSetSuspended(t, ns, "old", true)

	eventually(t, func() error {
		cur := &trainer.TrainingRuntime{}
		if err := env.Client.Get(ctx(), client.ObjectKeyFromObject(rt), cur); err != nil {
			return err
		}
		c := &cur.Spec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0]
		c.Image, c.Env = "example.com/base:v2", []corev1.EnvVar{{Name: "RUNTIME_VERSION", Value: "2"}}
		return env.Client.Update(ctx(), cur)
	})
	patchTrainJob(t, ns, "old", func(j *trainer.TrainJob) { j.Spec.Suspend = ptr.To(false) })
	js := waitJobSetSuspended(t, ns, "old", false)
	c := js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0]
	require.Equal(t, "example.com/base:v1", c.Image)
	require.Equal(t, "1", envOf(c)["RUNTIME_VERSION"])

	fresh := old.DeepCopy()
	fresh.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: "fresh"}
	fresh.Spec.Suspend = nil
	require.NoError(t, env.Client.Create(ctx(), fresh))
	c = trainerContainer(t, waitJobSet(t, ns, "fresh"))
	require.Equal(t, "example.com/base:v2", c.Image)
	require.Equal(t, "2", envOf(c)["RUNTIME_VERSION"])
}

func batchJobTemplate(c corev1.Container) batchv1.JobTemplateSpec {
	var t batchv1.JobTemplateSpec
	t.Labels = map[string]string{trainer.AncestorLabel: trainer.AncestorTrainer}
	t.Spec.Template.Spec.Containers = []corev1.Container{c}
	return t
}

// A failed JobSet fails the TrainJob with the JobSet's reason and message.
func TestJobSetFailureFailsTrainJob(t *testing.T) {
	ns := newNamespace(t)
	applyFile(t, ns, "runtimes/torch-distributed.yaml")
	require.NoError(t, env.Client.Create(ctx(), torchJob(ns, "boom", nil)))
	js := waitJobSet(t, ns, "boom")
	setJobSetStatus(t, js, func(s *jobsetv1alpha2.JobSetStatus) {
		s.Conditions = []metav1.Condition{{Type: string(jobsetv1alpha2.JobSetFailed), Status: metav1.ConditionTrue,
			Reason: "FailedJobs", Message: "jobset failed due to one or more job failures", LastTransitionTime: metav1.Now()}}
	})
	job := waitCondition(t, ns, "boom", trainer.TrainJobFailed, metav1.ConditionTrue, "FailedJobs")
	require.Equal(t, "jobset failed due to one or more job failures", findCond(job, trainer.TrainJobFailed).Message)
	waitPhase(t, ns, "boom", trainer.TrainJobFailedPhase)
}

// Deleting a TrainJob deletes its JobSet (the garbage collector follows the
// controller owner reference).
func TestDeleteCascades(t *testing.T) {
	ns := newNamespace(t)
	applyFile(t, ns, "runtimes/torch-distributed.yaml")
	job := torchJob(ns, "gone", nil)
	require.NoError(t, env.Client.Create(ctx(), job))
	waitJobSet(t, ns, "gone")
	require.NoError(t, env.Client.Delete(ctx(), job, client.PropagationPolicy(metav1.DeletePropagationBackground)))
	deadline := time.Now().Add(90 * time.Second) // the garbage collector may need a discovery resync
	for {
		err := env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "gone"}, &jobsetv1alpha2.JobSet{})
		if apierrors.IsNotFound(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("JobSet still exists 90s after its TrainJob was deleted (err=%v)", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// A finished TrainJob never gets a new JobSet, even when its JobSet is deleted.
func TestFinishedJobGetsNoNewJobSet(t *testing.T) {
	ns := newNamespace(t)
	applyFile(t, ns, "runtimes/torch-distributed.yaml")
	require.NoError(t, env.Client.Create(ctx(), torchJob(ns, "done", nil)))
	js := waitJobSet(t, ns, "done")
	setJobSetStatus(t, js, func(s *jobsetv1alpha2.JobSetStatus) {
		s.Conditions = []metav1.Condition{{Type: string(jobsetv1alpha2.JobSetCompleted), Status: metav1.ConditionTrue,
			Reason: "AllJobsCompleted", Message: "done", LastTransitionTime: metav1.Now()}}
	})
	waitCondition(t, ns, "done", trainer.TrainJobComplete, metav1.ConditionTrue, "AllJobsCompleted")
	require.NoError(t, env.Client.Delete(ctx(), js))
	consistently(t, 3*time.Second, func() error {
		err := env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "done"}, &jobsetv1alpha2.JobSet{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("a JobSet exists for a finished TrainJob (err=%v)", err)
	})
	waitPhase(t, ns, "done", trainer.TrainJobCompletePhase)
}

// Restarting the manager right after it created a JobSet leaves exactly that one
// JobSet, and the TrainJob's status converges.
func TestManagerRestartKeepsOneJobSet(t *testing.T) {
	ns := newNamespace(t)
	applyFile(t, ns, "runtimes/torch-distributed.yaml")
	env.StopManager()
	t.Cleanup(func() { _ = env.StartManager(framework.ManagerOptions{}) })

	for i := 0; i < 3; i++ {
		require.NoError(t, env.Client.Create(ctx(), torchJob(ns, fmt.Sprintf("restart-%d", i), nil)))
	}
	require.NoError(t, env.StartManager(framework.ManagerOptions{}))
	first := waitJobSet(t, ns, "restart-0")
	env.StopManager() // possibly before it wrote status, or created the other JobSets
	require.NoError(t, env.StartManager(framework.ManagerOptions{}))

	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("restart-%d", i)
		job := waitCreated(t, ns, name)
		require.Len(t, jobSetsOwnedBy(t, job), 1, "TrainJob %s", name)
	}
	again := waitJobSet(t, ns, "restart-0")
	require.Equal(t, first.UID, again.UID)
	env.StopManager()
}

// activeDeadlineSeconds fails the TrainJob and removes its JobSet.
func TestActiveDeadline(t *testing.T) {
	ns := newNamespace(t)
	applyFile(t, ns, "runtimes/torch-distributed.yaml")
	require.NoError(t, env.Client.Create(ctx(), torchJob(ns, "late", func(j *trainer.TrainJob) {
		j.Spec.ActiveDeadlineSeconds = ptr.To[int64](3)
	})))
	waitJobSet(t, ns, "late")
	waitCondition(t, ns, "late", trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobDeadlineExceededReason)
	eventually(t, func() error {
		err := env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "late"}, &jobsetv1alpha2.JobSet{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("JobSet still there (err=%v)", err)
	})
	waitPhase(t, ns, "late", trainer.TrainJobFailedPhase)
}

// A missing runtime is reported in status; creating it starts the job.
func TestMissingRuntimeThenCreated(t *testing.T) {
	ns := newNamespace(t)
	require.NoError(t, env.Client.Create(ctx(), &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "waiting"},
		Spec:       trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "later", Kind: ptr.To(trainer.TrainingRuntimeKind)}},
	}))
	job := waitCondition(t, ns, "waiting", trainer.TrainJobCreated, metav1.ConditionFalse, trainer.TrainJobRuntimeNotFound)
	require.Contains(t, findCond(job, trainer.TrainJobCreated).Message, `TrainingRuntime "`+ns+`/later" does not exist`)
	require.Equal(t, trainer.TrainJobPending, job.Status.Phase)

	require.NoError(t, env.Client.Create(ctx(), &trainer.TrainingRuntime{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "later"},
		Spec: trainer.TrainingRuntimeSpec{Template: trainer.JobSetTemplateSpec{Spec: jobsetv1alpha2.JobSetSpec{
			ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{Name: "node", Template: batchJobTemplate(corev1.Container{Name: "node", Image: "busybox"})}},
		}}},
	}))
	waitJobSet(t, ns, "waiting")
	waitCreated(t, ns, "waiting")
}

// Input the pipeline rejects is reported in status with the offending field, and
// no JobSet is made; a runtime kind Trainyard cannot run fails the TrainJob.
func TestBadInputIsReportedInStatus(t *testing.T) {
	ns := newNamespace(t)
	applyFile(t, ns, "runtimes/torch-distributed.yaml")
	require.NoError(t, env.Client.Create(ctx(), torchJob(ns, "reserved-env", func(j *trainer.TrainJob) {
		j.Spec.Trainer.Env = []corev1.EnvVar{{Name: "PET_NNODES", Value: "7"}}
	})))
	job := waitCondition(t, ns, "reserved-env", trainer.TrainJobCreated, metav1.ConditionFalse, trainer.TrainJobBuildFailedReason)
	require.Contains(t, findCond(job, trainer.TrainJobCreated).Message, "spec.trainer.env[0].name")

	require.NoError(t, env.Client.Create(ctx(), torchJob(ns, "bad-override", func(j *trainer.TrainJob) {
		j.Spec.PodTemplateOverrides = []trainer.PodTemplateOverride{{TargetJobs: []trainer.PodTemplateOverrideTargetJob{{Name: "launcher"}}}}
	})))
	job = waitCondition(t, ns, "bad-override", trainer.TrainJobCreated, metav1.ConditionFalse, trainer.TrainJobBuildFailedReason)
	require.Contains(t, findCond(job, trainer.TrainJobCreated).Message, "spec.podTemplateOverrides[0].targetJobs[0].name")

	require.NoError(t, env.Client.Create(ctx(), torchJob(ns, "odd-kind", func(j *trainer.TrainJob) {
		j.Spec.RuntimeRef.Kind = ptr.To("Deployment")
	})))
	waitCondition(t, ns, "odd-kind", trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobRuntimeNotSupportedReason)
	waitPhase(t, ns, "odd-kind", trainer.TrainJobFailedPhase)

	require.NoError(t, env.Client.Create(ctx(), torchJob(ns, "9lives", nil)))
	job = waitCondition(t, ns, "9lives", trainer.TrainJobCreated, metav1.ConditionFalse, trainer.TrainJobBuildFailedReason)
	require.Contains(t, findCond(job, trainer.TrainJobCreated).Message, "metadata.name: Invalid value: \"9lives\": must start with a lowercase letter")

	consistently(t, time.Second, func() error {
		for _, n := range []string{"reserved-env", "bad-override", "odd-kind", "9lives"} {
			if err := env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: n}, &jobsetv1alpha2.JobSet{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("TrainJob %s got a JobSet (err=%v)", n, err)
			}
		}
		return nil
	})
}

// A JobSet of the same name that this TrainJob does not own is never touched.
func TestForeignJobSetIsLeftAlone(t *testing.T) {
	ns := newNamespace(t)
	applyFile(t, ns, "runtimes/torch-distributed.yaml")
	foreign := &jobsetv1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken"},
		Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{
			Name: "other", Replicas: 1, Template: batchJobTemplate(corev1.Container{Name: "c", Image: "busybox"})}}},
	}
	require.NoError(t, env.Client.Create(ctx(), foreign))
	require.NoError(t, env.Client.Create(ctx(), torchJob(ns, "taken", nil)))
	job := waitCondition(t, ns, "taken", trainer.TrainJobCreated, metav1.ConditionFalse, trainer.TrainJobJobSetNotOwnedReason)
	require.Contains(t, findCond(job, trainer.TrainJobCreated).Message, "not controlled by TrainJob taken")
	var js jobsetv1alpha2.JobSet
	require.NoError(t, env.Client.Get(ctx(), client.ObjectKeyFromObject(foreign), &js))
	require.Equal(t, "other", js.Spec.ReplicatedJobs[0].Name)
}

// TrainJobs managed by MultiKueue are left to it.
func TestOtherManagerIsLeftAlone(t *testing.T) {
	ns := newNamespace(t)
	applyFile(t, ns, "runtimes/torch-distributed.yaml")
	require.NoError(t, env.Client.Create(ctx(), torchJob(ns, "remote", func(j *trainer.TrainJob) {
		j.Spec.ManagedBy = ptr.To(trainer.MultiKueueControllerName)
	})))
	consistently(t, 2*time.Second, func() error {
		job := getTrainJob(t, ns, "remote")
		if len(job.Status.Conditions) > 0 {
			return fmt.Errorf("status written: %+v", job.Status)
		}
		if err := env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "remote"}, &jobsetv1alpha2.JobSet{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("JobSet created (err=%v)", err)
		}
		return nil
	})
}

// The API server itself (CRD schema and CEL) rejects malformed TrainJobs.
func TestAPIServerValidation(t *testing.T) {
	ns := newNamespace(t)
	applyFile(t, ns, "runtimes/torch-distributed.yaml")
	cases := map[string]struct {
		job  *trainer.TrainJob
		want string
	}{
		"numNodes negative (0 is allowed since Kubeflow Trainer v2.4)": {job: torchJob(ns, "negative", func(j *trainer.TrainJob) { j.Spec.Trainer.NumNodes = ptr.To[int32](-1) }),
			want: "spec.trainer.numNodes"},
		"unknown managedBy": {job: torchJob(ns, "mb", func(j *trainer.TrainJob) { j.Spec.ManagedBy = ptr.To("example.com/other") }),
			want: "managedBy must be trainer.kubeflow.org/trainjob-controller or kueue.x-k8s.io/multikueue"},
		"numProcPerNode word": {job: torchJob(ns, "np", func(j *trainer.TrainJob) {
			j.Spec.Trainer.NumProcPerNode = ptrIntOrString("many")
		}), want: "numProcPerNode must be an integer >= 1 or one of auto, cpu, gpu"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := env.Client.Create(ctx(), tc.job)
			require.Error(t, err)
			require.True(t, strings.Contains(err.Error(), tc.want), "error %q does not mention %q", err, tc.want)
		})
	}

	// Immutable once created: trainer and runtimeRef.
	require.NoError(t, env.Client.Create(ctx(), torchJob(ns, "fixed", nil)))
	// Retry on conflict: the controller writes status concurrently, and a stale
	// resourceVersion is rejected before the object is validated.
	var err error
	for i := 0; i < 20; i++ {
		job := getTrainJob(t, ns, "fixed")
		job.Spec.Trainer.Image = ptr.To("example.com/other:v2")
		if err = env.Client.Update(ctx(), job); !apierrors.IsConflict(err) {
			break
		}
	}
	require.Error(t, err)
	require.Contains(t, err.Error(), "spec.trainer: Invalid value")
	require.Contains(t, err.Error(), "field is immutable")
}
