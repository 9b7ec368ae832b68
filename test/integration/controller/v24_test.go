package controller

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/childsync"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
	"github.com/trainyard/trainyard/pkg/controller/trainjob"
	"github.com/trainyard/trainyard/test/integration/framework"
)

// Kubeflow Trainer v2.4's rules on a real API server, with webhooks off.

// A runtime whose replicated job name is longer than v2.4's 20 characters
// (stored with the webhooks off, or before the upgrade) gets its TrainJobs a
// field error in status, naming the runtime's field, and no JobSet.
func TestLongReplicatedJobNameInStatus(t *testing.T) {
	ns := newNamespace(t)
	docs := applyFile(t, ns, "runtimes/torch-distributed.yaml")
	var shipped trainer.ClusterTrainingRuntime
	require.NoError(t, env.Client.Get(ctx(), client.ObjectKey{Name: docs[0].GetName()}, &shipped))
	rt := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "long"}, Spec: *shipped.Spec.DeepCopy()}
	rt.Spec.Template.Spec.ReplicatedJobs[0].Name = "trainer-nodes-of-lab1" // 21 characters
	require.NoError(t, env.Client.Create(ctx(), rt))
	require.NoError(t, env.Client.Create(ctx(), torchJob(ns, "on-long", func(j *trainer.TrainJob) {
		j.Spec.RuntimeRef = trainer.RuntimeRef{Name: "long", Kind: ptr.To(trainer.TrainingRuntimeKind)}
	})))
	job := waitCondition(t, ns, "on-long", trainer.TrainJobCreated, metav1.ConditionFalse, trainer.TrainJobBuildFailedReason)
	require.Contains(t, findCond(job, trainer.TrainJobCreated).Message,
		`spec.runtimeRef: Invalid value: "long": runtime TrainingRuntime "long": spec.template.spec.replicatedJobs[0].name: Invalid value: "trainer-nodes-of-lab1": must be no more than 20 characters`)
	consistently(t, time.Second, func() error {
		if err := env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "on-long"}, &jobsetv1alpha2.JobSet{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("a JobSet for a TrainJob on a runtime v2.4 rejects (err=%v)", err)
		}
		return nil
	})
}

// prteEnv are the Open MPI 5 variables v2.4 adds to the launcher.
var prteEnv = []string{"PRTE_MCA_prte_default_hostfile", "PRTE_MCA_prte_keep_fqdn_hostnames", "PRTE_MCA_prte_set_default_slots", "PRTE_MCA_plm_ssh_args"}

// An MPI TrainJob suspended before the upgrade to v2.4 resumes: its JobSet
// was rendered without the PRTE_MCA_* variables (and with the runtime's image
// on the node pods), which JobSet keeps immutable; upstream's resume fails on
// that, Trainyard recreates the suspended JobSet as v2.4 renders it and
// resumes the new one. The old JobSet is made here as the previous manager
// made it: the current rendering without what v2.4 added, hashed again.
func TestMPIResumesAfterUpgrade(t *testing.T) {
	ns := newNamespace(t)
	applyFile(t, ns, "runtimes/deepspeed-distributed.yaml")
	require.NoError(t, env.Client.Create(ctx(), mpiJob(ns, "ds", func(j *trainer.TrainJob) {
		j.Spec.Suspend = ptr.To(true)
		j.Spec.Trainer.Image = ptr.To("example.com/mine:v1")
	})))
	current := waitJobSetSuspended(t, ns, "ds", true)
	waitCondition(t, ns, "ds", trainer.TrainJobSuspended, metav1.ConditionTrue, trainer.TrainJobSuspendedReason)

	env.StopManager()
	t.Cleanup(func() { _ = env.StartManager(framework.ManagerOptions{}) })
	old := &jobsetv1alpha2.JobSet{
		TypeMeta:   current.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ds", Labels: current.Labels, Annotations: current.Annotations, OwnerReferences: current.OwnerReferences},
		Spec:       *current.Spec.DeepCopy(),
	}
	for k := range old.Spec.ReplicatedJobs {
		rj := &old.Spec.ReplicatedJobs[k]
		c := &rj.Template.Spec.Template.Spec.Containers[0]
		c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return slices.Contains(prteEnv, e.Name) })
		if rj.Name == "node" {
			c.Image = "ghcr.io/kubeflow/trainer/deepspeed-runtime:v2.3.0"
		}
	}
	_, err := childsync.Hashes(old)
	require.NoError(t, err)
	require.NoError(t, env.Client.Delete(ctx(), current))
	eventually(t, func() error {
		if err := env.Client.Get(ctx(), client.ObjectKeyFromObject(current), &jobsetv1alpha2.JobSet{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("old JobSet not gone yet (err=%v)", err)
		}
		return nil
	})
	require.NoError(t, env.Client.Create(ctx(), old))
	// Kueue (or a user) resumes the job while the new manager starts.
	patchTrainJob(t, ns, "ds", func(j *trainer.TrainJob) { j.Spec.Suspend = ptr.To(false) })
	require.NoError(t, env.StartManager(framework.ManagerOptions{}))

	resumed := waitJobSetSuspended(t, ns, "ds", false)
	require.NotEqual(t, old.UID, resumed.UID, "the JobSet was not recreated")
	for _, rj := range resumed.Spec.ReplicatedJobs {
		c := rj.Template.Spec.Template.Spec.Containers[0]
		require.Equal(t, "example.com/mine:v1", c.Image, "%s image", rj.Name)
		if rj.Name == "launcher" {
			env := envOf(c)
			for _, name := range prteEnv {
				require.Contains(t, env, name, "launcher env")
			}
		}
	}
	waitCondition(t, ns, "ds", trainer.TrainJobSuspended, metav1.ConditionFalse, trainer.TrainJobResumedReason)
}

// Failed is terminal (v2.4): a failed TrainJob whose JobSet is deleted by
// hand gets no new JobSet and stays Failed; so does one whose JobSet failed
// and went at once (JobSet's ttlSecondsAfterFinished: 0), before the TrainJob's
// status said it failed.
func TestFailedIsTerminal(t *testing.T) {
	ns := newNamespace(t)
	applyFile(t, ns, "runtimes/torch-distributed.yaml")
	fail := func(s *jobsetv1alpha2.JobSetStatus) {
		s.Conditions = []metav1.Condition{{Type: string(jobsetv1alpha2.JobSetFailed), Status: metav1.ConditionTrue,
			Reason: "FailedJobs", Message: "jobset failed due to one or more job failures", LastTransitionTime: metav1.Now()}}
	}
	noJobSet := func(names ...string) {
		consistently(t, 3*time.Second, func() error {
			for _, n := range names {
				err := env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: n}, &jobsetv1alpha2.JobSet{})
				if !apierrors.IsNotFound(err) {
					return fmt.Errorf("a JobSet exists for the failed TrainJob %s (err=%v)", n, err)
				}
				var job trainer.TrainJob
				if err := env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: n}, &job); err != nil {
					return err
				}
				if c := findCond(&job, trainer.TrainJobFailed); c == nil || c.Status != metav1.ConditionTrue || c.Reason != "FailedJobs" ||
					job.Status.Phase != trainer.TrainJobFailedPhase {
					return fmt.Errorf("TrainJob %s left Failed: %s, %+v", n, job.Status.Phase, job.Status.Conditions)
				}
			}
			return nil
		})
	}

	// By hand, after the TrainJob says Failed.
	require.NoError(t, env.Client.Create(ctx(), torchJob(ns, "by-hand", nil)))
	js := waitJobSet(t, ns, "by-hand")
	setJobSetStatus(t, js, fail)
	waitCondition(t, ns, "by-hand", trainer.TrainJobFailed, metav1.ConditionTrue, "FailedJobs")
	require.NoError(t, env.Client.Delete(ctx(), js))

	// At once, as JobSet's TTL of 0 does: deleted a moment after it failed,
	// while the manager holds the job's Failed status to write it with the
	// next changes (--status-write-delay, 1 s by default; 3 s here, so that
	// the deletion surely falls in the wait).
	env.StopManager()
	t.Cleanup(func() { env.StopManager(); _ = env.StartManager(framework.ManagerOptions{}) })
	require.NoError(t, env.StartManager(framework.ManagerOptions{Kinds: func(ks []jobframework.Kind) {
		for _, k := range ks {
			if tj, ok := k.(*trainjob.Kind); ok {
				tj.Delays = jobframework.Delays{StatusDelay: 3 * time.Second, CountsDelay: 3 * time.Second}
			}
		}
	}}))
	require.NoError(t, env.Client.Create(ctx(), torchJob(ns, "ttl", nil)))
	js = waitJobSet(t, ns, "ttl")
	waitCreated(t, ns, "ttl")
	setJobSetStatus(t, js, fail)
	time.Sleep(500 * time.Millisecond) // the manager sees the JobSet failed, and holds the write
	require.NoError(t, env.Client.Delete(ctx(), js))

	waitCondition(t, ns, "ttl", trainer.TrainJobFailed, metav1.ConditionTrue, "FailedJobs")
	noJobSet("by-hand", "ttl")
	for _, n := range []string{"by-hand", "ttl"} {
		var job trainer.TrainJob
		require.NoError(t, env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: n}, &job))
		require.True(t, strings.HasPrefix(findCond(&job, trainer.TrainJobFailed).Message, "jobset failed"), n)
	}
}
