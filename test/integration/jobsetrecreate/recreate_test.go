// Package jobsetrecreate tests the JobSet rule's recreate path against the
// real thing that makes it necessary: JobSet's own admission webhooks
// (framework.Options.JobSetWebhooks), which refuse to change a suspended
// JobSet's template beyond the fields Kueue changes. A suspended TrainJob
// whose rendering changes in such a field gets a new JobSet; one whose
// rendering changes only in the mutable fields keeps its JobSet, updated.
package jobsetrecreate

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/test/integration/framework"
)

var env *framework.Env

func TestMain(m *testing.M) {
	framework.Main(m, &env, framework.Options{Webhooks: true, JobSetWebhooks: true}, framework.WithManager(framework.ManagerOptions{}))
}

func ctx() context.Context { return context.Background() }

func TestSuspendedJobSetRecreatedWhenImmutablePartChanges(t *testing.T) {
	ns := framework.NewNamespace(t, env.Client, "recreate")
	require.NoError(t, env.Client.Create(ctx(), &trainer.TrainingRuntime{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rt"},
		Spec: trainer.TrainingRuntimeSpec{
			MLPolicy: &trainer.MLPolicy{NumNodes: ptr.To[int32](1), MLPolicySource: trainer.MLPolicySource{Torch: &trainer.TorchMLPolicySource{}}},
			Template: trainer.JobSetTemplateSpec{Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{
				Name: "node", Replicas: 1,
				Template: batchv1.JobTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{trainer.AncestorLabel: trainer.AncestorTrainer}},
					Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
						Containers: []corev1.Container{{Name: trainer.NodeContainer, Image: "example.com/train:v1"}},
					}}},
				},
			}}}},
		},
	}))
	require.NoError(t, env.Client.Create(ctx(), &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job"},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: "rt", Kind: ptr.To(trainer.TrainingRuntimeKind)},
			Trainer:    &trainer.Trainer{NumNodes: ptr.To[int32](2)},
			Suspend:    ptr.To(true),
		},
	}))
	first := waitJobSet(t, ns, func(*jobsetv1alpha2.JobSet) error { return nil })
	require.True(t, ptr.Deref(first.Spec.Suspend, false), "the JobSet of a suspended TrainJob is suspended")

	// JobSet's webhook is what the recreate path is for: it refuses a change
	// of the suspended JobSet's pod spec in place.
	changed := first.DeepCopy()
	changed.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "scratch"}}
	err := env.Client.Update(ctx(), changed)
	require.True(t, apierrors.IsInvalid(err), "JobSet's webhook let a suspended JobSet's pod spec change: %v", err)
	require.ErrorContains(t, err, `admission webhook "vjobset.kb.io" denied the request`)

	// A node selector is one of the fields JobSet lets change while
	// suspended: the JobSet is updated in place.
	overrides(t, ns, &trainer.PodTemplateSpecOverride{NodeSelector: map[string]string{"pool": "a"}})
	updated := waitJobSet(t, ns, func(js *jobsetv1alpha2.JobSet) error {
		if js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.NodeSelector["pool"] != "a" {
			return fmt.Errorf("node selector not applied yet")
		}
		return nil
	})
	require.Equal(t, first.UID, updated.UID, "a change JobSet allows in place recreated the JobSet")

	// A volume is not: the JobSet is recreated with it, still suspended.
	overrides(t, ns, &trainer.PodTemplateSpecOverride{NodeSelector: map[string]string{"pool": "a"},
		Volumes: []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}})
	recreated := waitJobSet(t, ns, func(js *jobsetv1alpha2.JobSet) error {
		if js.UID == first.UID {
			return fmt.Errorf("JobSet not recreated yet")
		}
		return nil
	})
	require.True(t, ptr.Deref(recreated.Spec.Suspend, false), "the recreated JobSet is suspended")
	vols := recreated.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Volumes
	require.True(t, len(vols) == 1 && vols[0].Name == "scratch", "volumes of the recreated JobSet: %v", vols)
	waitEvent(t, ns, "job", "JobSetRecreated")

	var job trainer.TrainJob
	require.NoError(t, env.Client.Get(ctx(), types.NamespacedName{Namespace: ns, Name: "job"}, &job))
	for _, c := range job.Status.Conditions {
		require.False(t, c.Type == trainer.TrainJobCreated && c.Status == metav1.ConditionFalse, "Created=False: %s", c.Message)
	}
}

// overrides sets the TrainJob's one pod template override of the node job.
func overrides(t *testing.T, ns string, spec *trainer.PodTemplateSpecOverride) {
	t.Helper()
	framework.Eventually(t, func() error {
		var j trainer.TrainJob
		if err := env.Client.Get(ctx(), types.NamespacedName{Namespace: ns, Name: "job"}, &j); err != nil {
			return err
		}
		j.Spec.PodTemplateOverrides = []trainer.PodTemplateOverride{{
			TargetJobs: []trainer.PodTemplateOverrideTargetJob{{Name: "node"}}, Spec: spec}}
		return env.Client.Update(ctx(), &j)
	})
}

func waitJobSet(t *testing.T, ns string, ok func(*jobsetv1alpha2.JobSet) error) *jobsetv1alpha2.JobSet {
	t.Helper()
	var js jobsetv1alpha2.JobSet
	framework.Eventually(t, func() error {
		if err := env.Client.Get(ctx(), types.NamespacedName{Namespace: ns, Name: "job"}, &js); err != nil {
			return err
		}
		return ok(&js)
	})
	return &js
}

func waitEvent(t *testing.T, ns, name, reason string) {
	t.Helper()
	framework.WaitEvent(t, env.Client, ns, name, reason)
}
