package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// Pod fields added in Kubernetes 1.36 and 1.37 are kept by Trainyard's CRDs (they
// are generated from the k8s.io/api release in go.mod; on 1.35's CRDs the API
// server pruned them without a word) and reach the JobSet as far as JobSet's own
// CRD knows them.
func TestNewPodFieldsSurvive(t *testing.T) {
	ns := newNamespace(t)
	applyFile(t, ns, "test/integration/controller/testdata/runtime-new-pod-fields.yaml")
	applyFile(t, ns, "test/integration/controller/testdata/trainjob-new-pod-fields.yaml")

	// The runtime as stored keeps both.
	var rt trainer.TrainingRuntime
	require.NoError(t, env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "it-new-pod-fields"}, &rt))
	rtPod := rt.Spec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec
	require.Equal(t, &corev1.PodSchedulingGroup{PodGroupName: ptr.To("it-group")}, rtPod.SchedulingGroup)
	require.Equal(t, ptr.To[int32](0o750), rtPod.Volumes[0].EmptyDir.Mode)

	// The TrainJob as stored: the 1.37 fields of its overrides are all there.
	job := getTrainJob(t, ns, "new-pod-fields")
	require.Len(t, job.Spec.PodTemplateOverrides, 1)
	over := job.Spec.PodTemplateOverrides[0].Spec
	require.NotNil(t, over)
	wantVolumes := []corev1.Volume{
		{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Mode: ptr.To[int32](0o710)}}},
		{Name: "token", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: "hub-token", DefaultUser: ptr.To[int64](1000)}}},
	}
	if diff := cmp.Diff(wantVolumes, over.Volumes); diff != "" {
		t.Errorf("TrainJob override volumes (-want +got):\n%s", diff)
	}
	require.Len(t, over.Containers, 1)
	require.Equal(t, []string{"nosymfollow"}, over.Containers[0].VolumeMounts[0].BindMountOptions)

	// The JobSet: the runtime's 1.36 field (spec.schedulingGroup) is in JobSet
	// v0.12.0's CRD and arrives; so do the volumes and the mount.
	js := waitJobSet(t, ns, "new-pod-fields")
	pod := js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec
	require.Equal(t, &corev1.PodSchedulingGroup{PodGroupName: ptr.To("it-group")}, pod.SchedulingGroup)
	names := []string{}
	for _, v := range pod.Volumes {
		names = append(names, v.Name)
	}
	require.ElementsMatch(t, []string{"scratch", "data", "token"}, names)
	mount := trainerContainer(t, js).VolumeMounts
	require.Len(t, mount, 1)
	require.Equal(t, "/data", mount[0].MountPath)
	// JobSet v0.12.0's CRD is generated from Kubernetes 1.36, so the API server
	// prunes the 1.37 fields from the JobSet (not from the TrainJob or the
	// runtime). When a JobSet release generated from 1.37 is in go.mod this
	// fails: then assert that they arrive.
	for _, v := range pod.Volumes {
		switch {
		case v.EmptyDir != nil:
			require.Nil(t, v.EmptyDir.Mode, "volume %s: JobSet's CRD now keeps emptyDir.mode", v.Name)
		case v.Secret != nil:
			require.Nil(t, v.Secret.DefaultUser, "volume %s: JobSet's CRD now keeps secret.defaultUser", v.Name)
		}
	}
	require.Empty(t, mount[0].BindMountOptions, "JobSet's CRD now keeps bindMountOptions")
}
