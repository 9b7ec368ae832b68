package cli

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
)

// mpiPod is a pod of MPIJob pi whose only container is named as the user
// named it (v1 requires no name).
func mpiPod(name, rtype, index, container string) *corev1.Pod {
	p := replicaPod("pi", name, rtype, index, corev1.PodRunning, corev1.ResourceRequirements{})
	p.Labels[kubeflowv1.OperatorNameLabel] = kubeflowv1.MPIJobOperatorName
	p.Spec.Containers[0].Name = container
	p.Status.ContainerStatuses = containerStatuses(p)
	return p
}

// An MPIJob's launcher and workers name their containers freely: `logs`
// reads each pod's main one, `get` lists the replicas as v1 named them.
func TestMPIJobCommands(t *testing.T) {
	job := &kubeflowv1.MPIJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pi"}, Spec: kubeflowv1.MPIJobSpec{
		MPIReplicaSpecs: map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{"Launcher": {}, "Worker": {Replicas: ptr.To[int32](1)}}},
		Status: kubeflowv1.JobStatus{Conditions: []kubeflowv1.JobCondition{
			jobCond(kubeflowv1.JobCreated, corev1.ConditionTrue, "MPIJobCreated", ""),
			jobCond(kubeflowv1.JobRunning, corev1.ConditionTrue, "MPIJobRunning", "MPIJob pi is running.")}}}
	f := newFakeCluster(t, job,
		mpiPod("pi-worker-0-0-bbbbb", "worker", "0", "mpi-worker"),
		mpiPod("pi-launcher-0-0-aaaaa", "launcher", "0", "mpi-launcher"))
	code, out, errOut := f.run("logs", "mpijob/pi")
	if diff := cmp.Diff("[launcher-0]: fake logs\n[worker-0]: fake logs\n", out); code != 0 || diff != "" {
		t.Errorf("logs mpijob/pi: exit %d, %s, stdout (-want +got):\n%s", code, errOut, diff)
	}
	code, out, errOut = f.run("get", "--kind", "mpijob")
	want := "NAME  REPLICAS              STATUS   REASON         AGE\npi    Launcher 1, Worker 1  Running  MPIJobRunning  -\n"
	if diff := cmp.Diff(want, out); code != 0 || diff != "" {
		t.Errorf("get --kind mpijob: exit %d, %s, stdout (-want +got):\n%s", code, errOut, diff)
	}
}
