package webhooks

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
)

func v1Replica(n *int32, container string) *kubeflowv1.ReplicaSpec {
	return &kubeflowv1.ReplicaSpec{Replicas: n, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: container, Image: "img:1"}}}}}
}

func mpiJob(ns, name string, mutate func(*kubeflowv1.MPIJob)) *kubeflowv1.MPIJob {
	j := &kubeflowv1.MPIJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: kubeflowv1.MPIJobSpec{
		MPIReplicaSpecs: map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{
			"Launcher": v1Replica(ptr.To[int32](1), "launcher"), "Worker": v1Replica(ptr.To[int32](2), "worker")}}}
	if mutate != nil {
		mutate(j)
	}
	return j
}

func xgboostJob(ns, name string, mutate func(*kubeflowv1.XGBoostJob)) *kubeflowv1.XGBoostJob {
	j := &kubeflowv1.XGBoostJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: kubeflowv1.XGBoostJobSpec{
		XGBReplicaSpecs: map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{
			"Master": v1Replica(ptr.To[int32](1), "xgboost"), "Worker": v1Replica(ptr.To[int32](1), "xgboost")}}}
	if mutate != nil {
		mutate(j)
	}
	return j
}

// Bad MPIJobs and XGBoostJobs are rejected at admission with the field
// errors their controllers would put in their status.
func TestBadV1JobsAreRejected(t *testing.T) {
	ns := newNamespace(t)
	cases := []struct {
		name          string
		job           client.Object
		field, detail string
	}{
		{"MPIJob without a Launcher", mpiJob(ns, "a", func(j *kubeflowv1.MPIJob) { delete(j.Spec.MPIReplicaSpecs, "Launcher") }),
			"spec.mpiReplicaSpecs[Launcher]", "a MPIJob must have a Launcher"},
		{"MPIJob with 2 Launchers", mpiJob(ns, "a", func(j *kubeflowv1.MPIJob) { j.Spec.MPIReplicaSpecs["Launcher"].Replicas = ptr.To[int32](2) }),
			"spec.mpiReplicaSpecs[Launcher].replicas", "Forbidden: must be 1"},
		{"MPIJob with a Server", mpiJob(ns, "a", func(j *kubeflowv1.MPIJob) { j.Spec.MPIReplicaSpecs["Server"] = v1Replica(nil, "s") }),
			"spec.mpiReplicaSpecs[Server]", `Unsupported value: "Server"`},
		{"MPIJob with slotsPerWorker 0", mpiJob(ns, "a", func(j *kubeflowv1.MPIJob) { j.Spec.SlotsPerWorker = ptr.To[int32](0) }),
			"spec.slotsPerWorker", "must be at least 1"},
		{"XGBoostJob without an xgboost container", xgboostJob(ns, "a", func(j *kubeflowv1.XGBoostJob) {
			j.Spec.XGBReplicaSpecs["Worker"].Template.Spec.Containers[0].Name = "main"
		}), "spec.xgbReplicaSpecs[Worker].template.spec.containers", "must have at least one container with name xgboost"},
		{"XGBoostJob with 2 Masters", xgboostJob(ns, "a", func(j *kubeflowv1.XGBoostJob) { j.Spec.XGBReplicaSpecs["Master"].Replicas = ptr.To[int32](2) }),
			"spec.xgbReplicaSpecs[Master].replicas", "Forbidden: must be 1"},
		{"XGBoostJob with a bad backoffLimit", xgboostJob(ns, "a", func(j *kubeflowv1.XGBoostJob) { j.Spec.RunPolicy.BackoffLimit = ptr.To[int32](-1) }),
			"spec.runPolicy.backoffLimit", "must be greater than or equal to 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			requireFieldError(t, env.Client.Create(ctx(), tc.job), tc.field, tc.detail)
		})
	}
}

// Valid jobs are stored with v1's defaults.
func TestV1JobsAreDefaulted(t *testing.T) {
	ns := newNamespace(t)
	m := mpiJob(ns, "pi", func(j *kubeflowv1.MPIJob) { j.Spec.MPIReplicaSpecs["Worker"].Replicas = nil })
	require.NoError(t, env.Client.Create(ctx(), m))
	var stored kubeflowv1.MPIJob
	require.NoError(t, env.Client.Get(ctx(), client.ObjectKeyFromObject(m), &stored))
	got := []any{*stored.Spec.SlotsPerWorker, *stored.Spec.RunPolicy.CleanPodPolicy, *stored.Spec.MPIReplicaSpecs["Worker"].Replicas,
		stored.Spec.MPIReplicaSpecs["Launcher"].RestartPolicy}
	if diff := cmp.Diff([]any{int32(1), kubeflowv1.CleanPodPolicyNone, int32(0), kubeflowv1.RestartPolicyNever}, got); diff != "" {
		t.Errorf("stored MPIJob defaults (-want +got):\n%s", diff)
	}

	x := xgboostJob(ns, "iris", nil)
	require.NoError(t, env.Client.Create(ctx(), x))
	var xs kubeflowv1.XGBoostJob
	require.NoError(t, env.Client.Get(ctx(), client.ObjectKeyFromObject(x), &xs))
	if diff := cmp.Diff([]corev1.ContainerPort{{Name: "xgboostjob-port", ContainerPort: 9999, Protocol: corev1.ProtocolTCP}},
		xs.Spec.XGBReplicaSpecs["Master"].Template.Spec.Containers[0].Ports); diff != "" {
		t.Errorf("stored XGBoostJob port (-want +got):\n%s", diff)
	}
}
