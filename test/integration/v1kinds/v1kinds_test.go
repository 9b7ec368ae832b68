package v1kinds

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/test/integration/framework"
)

func replica(n int32, container string, cmd ...string) *kubeflowv1.ReplicaSpec {
	return &kubeflowv1.ReplicaSpec{Replicas: ptr.To(n), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: container, Image: "img:1", Command: cmd}}}}}
}

// An MPIJob runs as a JobSet of its launcher and workers, with its
// ConfigMap (hostfile), SSH key Secret and the workers' Services; it is
// Running once its launcher runs and Succeeded once the JobSet completes
// (the launcher's success), with v1's reasons.
func TestMPIJobRuns(t *testing.T) {
	ns := framework.NewNamespace(t, c, "mpi")
	job := &kubeflowv1.MPIJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pi"}, Spec: kubeflowv1.MPIJobSpec{
		SlotsPerWorker: ptr.To[int32](2),
		MPIReplicaSpecs: map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{
			"Launcher": replica(1, "launcher", "mpirun", "/pi"), "Worker": replica(2, "worker")}}}
	require.NoError(t, c.Create(ctx(), job))
	js := waitJobSet(t, ns, "pi")
	var names []string
	for _, rj := range js.Spec.ReplicatedJobs {
		names = append(names, rj.Name)
	}
	if diff := cmp.Diff([]string{"launcher-0", "worker-0", "worker-1"}, names); diff != "" {
		t.Errorf("replicated jobs (-want +got):\n%s", diff)
	}
	owner := metav1.GetControllerOf(js)
	require.NotNil(t, owner)
	require.Equal(t, "MPIJob", owner.Kind)

	var cm corev1.ConfigMap
	eventually(t, func() error { return c.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "pi-config"}, &cm) })
	require.Equal(t, "pi-worker-0 slots=2\npi-worker-1 slots=2\n", cm.Data["hostfile"])
	var secret corev1.Secret
	eventually(t, func() error { return c.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "pi-ssh"}, &secret) })
	require.True(t, strings.HasPrefix(string(secret.Data["ssh-publickey"]), "ecdsa-sha2-nistp521 "), "public key %q", secret.Data["ssh-publickey"])
	require.NotEmpty(t, secret.Data[corev1.SSHAuthPrivateKey])
	for _, s := range []string{"pi-worker-0", "pi-worker-1"} {
		var svc corev1.Service
		eventually(t, func() error { return c.Get(ctx(), client.ObjectKey{Namespace: ns, Name: s}, &svc) })
		require.Equal(t, corev1.ClusterIPNone, svc.Spec.ClusterIP)
	}

	status := func() *kubeflowv1.JobStatus { return &job.Status }
	waitCondition(t, job, status, kubeflowv1.JobCreated, "MPIJobCreated")
	runPod(t, js, "worker-0", corev1.PodRunning)
	runPod(t, js, "launcher-0", corev1.PodRunning)
	waitCondition(t, job, status, kubeflowv1.JobRunning, "MPIJobRunning")
	finishJobSet(t, js, "Completed")
	waitCondition(t, job, status, kubeflowv1.JobSucceeded, "MPIJobSucceeded")
	require.NotNil(t, job.Status.CompletionTime)
	if n := len(job.Status.Conditions); job.Status.Conditions[n-1].Type != kubeflowv1.JobSucceeded {
		t.Errorf("last condition %s, want Succeeded (kubectl's State column)", job.Status.Conditions[n-1].Type)
	}
	if rs := job.Status.ReplicaStatuses["Launcher"]; rs == nil || rs.Succeeded != 1 {
		t.Errorf("launcher replica status %+v, want 1 succeeded", rs)
	}
}

// With webhooks off, a bad MPIJob fails with the webhook's field error in
// its status, and nothing runs.
func TestBadMPIJobFailsInStatus(t *testing.T) {
	ns := framework.NewNamespace(t, c, "mpi")
	job := &kubeflowv1.MPIJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad"}, Spec: kubeflowv1.MPIJobSpec{
		MPIReplicaSpecs: map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{"Launcher": replica(2, "launcher")}}}
	require.NoError(t, c.Create(ctx(), job))
	waitCondition(t, job, func() *kubeflowv1.JobStatus { return &job.Status }, kubeflowv1.JobFailed, "MPIJobFailedValidation")
	msg := job.Status.Conditions[len(job.Status.Conditions)-1].Message
	require.Contains(t, msg, "spec.mpiReplicaSpecs[Launcher].replicas: Forbidden: must be 1")
	var cm corev1.ConfigMap
	require.Error(t, c.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "bad-config"}, &cm), "a failed MPIJob made its ConfigMap")
}

// An XGBoostJob's pods get v1's environment; it Succeeds with its Master,
// and a bad one fails in status.
func TestXGBoostJobRuns(t *testing.T) {
	ns := framework.NewNamespace(t, c, "xgb")
	job := &kubeflowv1.XGBoostJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "iris"}, Spec: kubeflowv1.XGBoostJobSpec{
		RunPolicy:       kubeflowv1.RunPolicy{CleanPodPolicy: ptr.To(kubeflowv1.CleanPodPolicyAll)},
		XGBReplicaSpecs: map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{"Master": replica(1, "xgboost"), "Worker": replica(2, "xgboost")}}}
	require.NoError(t, c.Create(ctx(), job))
	js := waitJobSet(t, ns, "iris")
	for i, rj := range js.Spec.ReplicatedJobs {
		var env []string
		for _, e := range rj.Template.Spec.Template.Spec.Containers[0].Env {
			env = append(env, e.Name+"="+e.Value)
		}
		want := []string{"MASTER_PORT=9999", "MASTER_ADDR=iris-master-0", "WORLD_SIZE=3", fmt.Sprintf("RANK=%d", i), "PYTHONUNBUFFERED=1",
			"WORKER_PORT=9999", "WORKER_ADDRS=iris-worker-0,iris-worker-1"}
		if diff := cmp.Diff(want, env); diff != "" {
			t.Errorf("%s env (-want +got):\n%s", rj.Name, diff)
		}
	}
	status := func() *kubeflowv1.JobStatus { return &job.Status }
	runPod(t, js, "master-0", corev1.PodRunning)
	waitCondition(t, job, status, kubeflowv1.JobRunning, "XGBoostJobRunning")
	finishJobSet(t, js, "Completed")
	waitCondition(t, job, status, kubeflowv1.JobSucceeded, "XGBoostJobSucceeded")
	// cleanPodPolicy All: the pods and Services go once it finished.
	eventually(t, func() error {
		var svcs corev1.ServiceList
		if err := c.List(ctx(), &svcs, client.InNamespace(ns)); err != nil {
			return err
		}
		var left []string
		for _, s := range svcs.Items {
			if s.DeletionTimestamp == nil {
				left = append(left, s.Name)
			}
		}
		if len(left) > 0 {
			return fmt.Errorf("Services left: %v", left)
		}
		return nil
	})

	bad := &kubeflowv1.XGBoostJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad"}, Spec: kubeflowv1.XGBoostJobSpec{
		XGBReplicaSpecs: map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{"Worker": replica(1, "main")}}}
	require.NoError(t, c.Create(ctx(), bad))
	waitCondition(t, bad, func() *kubeflowv1.JobStatus { return &bad.Status }, kubeflowv1.JobFailed, "XGBoostJobFailedValidation")
	msg := bad.Status.Conditions[len(bad.Status.Conditions)-1].Message
	for _, want := range []string{"spec.xgbReplicaSpecs[Master]: Required value", "spec.xgbReplicaSpecs[Worker].template.spec.containers: Required value: must have at least one container with name xgboost"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
}
