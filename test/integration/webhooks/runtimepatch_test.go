package webhooks

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// zonePatch is a runtime patch by manager that puts the trainer's pods in zone.
func zonePatch(manager, zone string, at *metav1.Time) trainer.RuntimePatch {
	return trainer.RuntimePatch{
		Manager: manager,
		Time:    at,
		TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{
			ReplicatedJobs: []trainer.ReplicatedJobPatch{{Name: "node", Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{
				Template: &trainer.PodTemplatePatch{Spec: &trainer.PodSpecPatch{NodeSelector: map[string]string{"zone": zone}}},
			}}}},
		}}},
	}
}

// patchTimes returns each patch's time by manager.
func patchTimes(j *trainer.TrainJob) map[string]*metav1.Time {
	out := map[string]*metav1.Time{}
	for _, p := range j.Spec.RuntimePatches {
		out[p.Manager] = p.Time
	}
	return out
}

// recent fails unless at is set and within the last minute (the webhook's
// "now", at second precision).
func recent(t *testing.T, at *metav1.Time, before time.Time, what string) {
	t.Helper()
	require.NotNil(t, at, "%s: no time", what)
	require.False(t, at.Time.Before(before.Truncate(time.Second)), "%s: time %s is before the request (%s)", what, at, before)
	require.WithinDuration(t, time.Now(), at.Time, time.Minute, "%s", what)
}

// The defaulting webhook stamps runtimePatches[].time as Kubeflow Trainer v2.3
// does: on create a client's time is kept and a missing one is now; on
// update a patch whose content changed is restamped, and an unchanged one
// keeps its old time whatever the client sent.
func TestRuntimePatchTimes(t *testing.T) {
	ns := newNamespace(t)
	newRuntime(t, ns, "rt")
	userTime := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	otherTime := metav1.NewTime(time.Now().Add(-2 * time.Hour).Truncate(time.Second))

	created := time.Now()
	j := job(ns, "stamped", func(j *trainer.TrainJob) {
		j.Spec.Suspend = ptr.To(true) // patches may change only while suspended
		j.Spec.RuntimePatches = []trainer.RuntimePatch{
			zonePatch("test.io/unchanged", "keep", nil),
			zonePatch("test.io/will-change", "old", &userTime),
		}
	})
	require.NoError(t, env.Client.Create(ctx(), j))
	got := patchTimes(j)
	recent(t, got["test.io/unchanged"], created, "create, patch without time")
	require.Equal(t, userTime.UTC(), got["test.io/will-change"].UTC(), "create keeps the client's time")
	unchanged := got["test.io/unchanged"].DeepCopy()

	// A read-modify-write that changes one patch, and sends another time for
	// the patch it does not change.
	updated := time.Now()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx(), client.ObjectKeyFromObject(j), j); err != nil {
			return err
		}
		j.Spec.RuntimePatches[0].Time = otherTime.DeepCopy()
		j.Spec.RuntimePatches[1] = zonePatch("test.io/will-change", "new", j.Spec.RuntimePatches[1].Time)
		return env.Client.Update(ctx(), j)
	}))

	var stored trainer.TrainJob
	require.NoError(t, env.Client.Get(ctx(), client.ObjectKeyFromObject(j), &stored))
	got = patchTimes(&stored)
	require.Equal(t, unchanged.UTC(), got["test.io/unchanged"].UTC(), "an unchanged patch keeps its old time, not the one the client sent")
	recent(t, got["test.io/will-change"], updated, "changed patch")
	require.NotEqual(t, userTime.UTC(), got["test.io/will-change"].UTC(), "a changed patch is restamped")
	if diff := cmp.Diff(map[string]string{"zone": "new"},
		stored.Spec.RuntimePatches[1].TrainingRuntimeSpec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.NodeSelector); diff != "" {
		t.Errorf("changed patch content (-want +got):\n%s", diff)
	}
}
