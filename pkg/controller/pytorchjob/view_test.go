package pytorchjob_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/cli/view"
	"github.com/trainyard/trainyard/pkg/controller/pytorchjob"
)

// replicaPod is a pod of PyTorchJob job for the replica rtype-index (labels as
// Trainyard and the training operator set them), in phase, on a node, with a
// pytorch container.
func replicaPod(job, name, rtype, index string, phase corev1.PodPhase, res corev1.ResourceRequirements) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name), Labels: map[string]string{
			kubeflowv1.JobNameLabel: job, kubeflowv1.OperatorNameLabel: kubeflowv1.PyTorchJobOperatorName,
			kubeflowv1.ReplicaTypeLabel: rtype, "jobset.sigs.k8s.io/jobset-name": job,
		}},
		Spec:   corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "pytorch", Resources: res}}},
		Status: corev1.PodStatus{Phase: phase},
	}
	if index != "" {
		p.Labels[kubeflowv1.ReplicaIndexLabel] = index
	}
	p.Status.ContainerStatuses = containerStatuses(p)
	return p
}

// containerStatuses are the pod's containers' statuses: terminated for a
// finished pod.
func containerStatuses(p *corev1.Pod) []corev1.ContainerStatus {
	var out []corev1.ContainerStatus
	for _, c := range p.Spec.Containers {
		cs := corev1.ContainerStatus{Name: c.Name}
		switch p.Status.Phase {
		case corev1.PodRunning:
			cs.State.Running = &corev1.ContainerStateRunning{}
		case corev1.PodSucceeded, corev1.PodFailed:
			cs.State.Terminated = &corev1.ContainerStateTerminated{}
		}
		out = append(out, cs)
	}
	return out
}

func limits(kv ...string) corev1.ResourceRequirements {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return corev1.ResourceRequirements{Limits: l}
}

func TestReplicaOf(t *testing.T) {
	elastic := replicaPod("pj", "p", "worker", "", corev1.PodRunning, corev1.ResourceRequirements{})
	elastic.Labels["batch.kubernetes.io/job-completion-index"] = "2"
	cases := []struct {
		name      string
		pod       *corev1.Pod
		want      string
		wantOrder int
		wantOK    bool
	}{
		{"master", replicaPod("pj", "p", "master", "0", "", corev1.ResourceRequirements{}), "master-0", 0, true},
		{"worker after the master", replicaPod("pj", "p", "worker", "3", "", corev1.ResourceRequirements{}), "worker-3", 1<<20 + 3, true},
		{"an earlier elastic worker: the completion index", elastic, "worker-2", 1<<20 + 2, true},
		{"no replica type", &corev1.Pod{}, "", 0, false},
		{"no index", replicaPod("pj", "p", "worker", "", "", corev1.ResourceRequirements{}), "", 0, false},
	}
	for _, tc := range cases {
		name, order, ok := pytorchjob.ReplicaOf(tc.pod)
		if name != tc.want || order != tc.wantOrder || ok != tc.wantOK {
			t.Errorf("%s: ReplicaOf = %q, %d, %v; want %q, %d, %v", tc.name, name, order, ok, tc.want, tc.wantOrder, tc.wantOK)
		}
	}
}

func jobCond(typ kubeflowv1.JobConditionType, status corev1.ConditionStatus, reason, msg string) kubeflowv1.JobCondition {
	return kubeflowv1.JobCondition{Type: typ, Status: status, Reason: reason, Message: msg}
}

// pyTorchJob is a PyTorchJob in namespace ns with a Master and workers Workers.
func pyTorchJob(name string, workers int32, conds ...kubeflowv1.JobCondition) *kubeflowv1.PyTorchJob {
	return &kubeflowv1.PyTorchJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: kubeflowv1.PyTorchJobSpec{PyTorchReplicaSpecs: map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{
			kubeflowv1.PyTorchJobReplicaTypeWorker: {Replicas: ptr.To(workers)},
			kubeflowv1.PyTorchJobReplicaTypeMaster: {},
		}},
		Status: kubeflowv1.JobStatus{Conditions: conds},
	}
}

func TestNewPyTorchJob(t *testing.T) {
	created := jobCond(kubeflowv1.JobCreated, corev1.ConditionTrue, "PyTorchJobCreated", "PyTorchJob pj is created.")
	running := jobCond(kubeflowv1.JobRunning, corev1.ConditionTrue, "PyTorchJobRunning", "PyTorchJob pj is running.")
	type shown struct{ Status, Reason string }
	cases := []struct {
		name  string
		conds []kubeflowv1.JobCondition
		want  shown
	}{
		{name: "no conditions yet", want: shown{}},
		{name: "created", conds: []kubeflowv1.JobCondition{created}, want: shown{"Created", "PyTorchJobCreated"}},
		{name: "running", conds: []kubeflowv1.JobCondition{created, running}, want: shown{"Running", "PyTorchJobRunning"}},
		{name: "resumed: Suspended=False is last, the job runs", conds: []kubeflowv1.JobCondition{created, running,
			jobCond(kubeflowv1.JobSuspended, corev1.ConditionFalse, "PyTorchJobResumed", "")}, want: shown{"Running", "PyTorchJobRunning"}},
		{name: "suspended", conds: []kubeflowv1.JobCondition{created, jobCond(kubeflowv1.JobSuspended, corev1.ConditionTrue, "PyTorchJobSuspended", "")},
			want: shown{"Suspended", "PyTorchJobSuspended"}},
		{name: "succeeded, Running False", conds: []kubeflowv1.JobCondition{created, jobCond(kubeflowv1.JobRunning, corev1.ConditionFalse, "PyTorchJobRunning", ""),
			jobCond(kubeflowv1.JobSucceeded, corev1.ConditionTrue, "PyTorchJobSucceeded", "")}, want: shown{"Succeeded", "PyTorchJobSucceeded"}},
		{name: "failed", conds: []kubeflowv1.JobCondition{created, running, jobCond(kubeflowv1.JobFailed, corev1.ConditionTrue, "PyTorchJobFailed", "")},
			want: shown{"Failed", "PyTorchJobFailed"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := pytorchjob.NewJob(pyTorchJob("pj", 2, tc.conds...), nil)
			if diff := cmp.Diff(tc.want, shown{j.Status, j.Reason}); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]pytorchjob.ReplicaCount{{"Master", 1}, {"Worker", 2}}, j.Replicas); diff != "" {
				t.Errorf("replicas (-want +got):\n%s", diff)
			}
		})
	}

	// Steps: the replicas in v1's order, devices from the pytorch container.
	failed := replicaPod("pj", "pj-worker-10-0-c", "worker", "10", corev1.PodFailed, corev1.ResourceRequirements{})
	failed.Status.ContainerStatuses[0].State.Terminated.Message = "OOM\n"
	pods := []corev1.Pod{*failed,
		*replicaPod("pj", "pj-worker-1-0-b", "worker", "1", corev1.PodRunning, limits("cpu", "2")),
		*replicaPod("pj", "pj-master-0-a", "master", "0", corev1.PodRunning, limits("nvidia.com/gpu", "1")),
		*replicaPod("pj", "pj-worker-0-0-z", "worker", "0", "", corev1.ResourceRequirements{}),
	}
	want := []view.Step{
		{Name: "master-0", Status: "Running", Pod: "pj-master-0-a", Device: "gpu", DeviceCount: "1"},
		{Name: "worker-0", Status: view.Unknown, Pod: "pj-worker-0-0-z", Device: view.Unknown, DeviceCount: view.Unknown},
		{Name: "worker-1", Status: "Running", Pod: "pj-worker-1-0-b", Device: "cpu", DeviceCount: "2"},
		{Name: "worker-10", Status: "Failed", Pod: "pj-worker-10-0-c", Device: view.Unknown, DeviceCount: view.Unknown, Message: "OOM"},
	}
	if diff := cmp.Diff(want, pytorchjob.NewJob(pyTorchJob("pj", 11), pods).Steps); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
}
