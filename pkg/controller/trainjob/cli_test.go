package trainjob_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/cli/view"
	"github.com/trainyard/trainyard/pkg/controller/trainjob"
)

func limits(kv ...string) corev1.ResourceRequirements {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return corev1.ResourceRequirements{Limits: l}
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// pod is a JobSet pod of replicated job rj with a completion index (or none when
// index is ""), in phase, created at t0+age, with one container.
func pod(name, rj, index string, phase corev1.PodPhase, age time.Duration, c corev1.Container) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0.Add(age)),
			Labels: map[string]string{"jobset.sigs.k8s.io/jobset-name": "j", trainjob.ReplicatedJobLabel: rj}},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{c}},
		Status: corev1.PodStatus{Phase: phase},
	}
	if index != "" {
		p.Labels["batch.kubernetes.io/job-completion-index"] = index
	}
	return p
}

func nodeContainer(res corev1.ResourceRequirements, env ...corev1.EnvVar) corev1.Container {
	return corev1.Container{Name: "node", Resources: res, Env: env}
}

func nproc(v string) corev1.EnvVar { return corev1.EnvVar{Name: "PET_NPROC_PER_NODE", Value: v} }

func TestSteps(t *testing.T) {
	cpu2 := limits("cpu", "2", "memory", "4Gi")
	cases := []struct {
		name string
		pods []corev1.Pod
		want []view.Step
	}{
		{name: "no pods", want: []view.Step{}},
		{
			name: "torch CPU nodes: count from PET_NPROC_PER_NODE, ordered by rank numerically",
			pods: []corev1.Pod{
				pod("j-node-0-10", "node", "10", corev1.PodPending, 0, nodeContainer(cpu2, nproc("2"))),
				pod("j-node-0-1", "node", "1", corev1.PodRunning, 0, nodeContainer(cpu2, nproc("2"))),
				pod("j-node-0-0", "node", "0", corev1.PodSucceeded, 0, nodeContainer(cpu2, nproc("2"))),
			},
			want: []view.Step{
				{Name: "node-0", Status: "Succeeded", Pod: "j-node-0-0", Device: "cpu", DeviceCount: "2"},
				{Name: "node-1", Status: "Running", Pod: "j-node-0-1", Device: "cpu", DeviceCount: "2"},
				{Name: "node-10", Status: "Pending", Pod: "j-node-0-10", Device: "cpu", DeviceCount: "2"},
			},
		},
		{
			name: "GPUs: auto is not a number, the GPU limit counts",
			pods: []corev1.Pod{pod("g", "node", "0", corev1.PodRunning, 0, nodeContainer(limits("cpu", "8", "nvidia.com/gpu", "4"), nproc("auto")))},
			want: []view.Step{{Name: "node-0", Status: "Running", Pod: "g", Device: "gpu", DeviceCount: "4"}},
		},
		{
			name: "GPUs a process node gave the step's container, from the pod's annotation",
			pods: []corev1.Pod{
				func() corev1.Pod {
					p := pod("g", "node", "0", corev1.PodRunning, 0, nodeContainer(limits("nvidia.com/gpu", "2"), nproc("2")))
					p.Annotations = map[string]string{"trainyard.io/gpus": "other=GPU-c;node=GPU-a,GPU-b"}
					return p
				}(),
				func() corev1.Pod { // another container's GPUs are not the step's
					p := pod("h", "node", "1", corev1.PodRunning, 0, nodeContainer(limits("nvidia.com/gpu", "1")))
					p.Annotations = map[string]string{"trainyard.io/gpus": "other=GPU-c"}
					return p
				}(),
			},
			want: []view.Step{
				{Name: "node-0", Status: "Running", Pod: "g", Device: "gpu", DeviceCount: "2", GPUs: []string{"GPU-a", "GPU-b"}},
				{Name: "node-1", Status: "Running", Pod: "h", Device: "gpu", DeviceCount: "1"},
			},
		},
		{
			name: "no limits: a numeric PET_NPROC_PER_NODE still gives the count",
			pods: []corev1.Pod{pod("p", "node", "0", corev1.PodRunning, 0, nodeContainer(corev1.ResourceRequirements{}, nproc("1")))},
			want: []view.Step{{Name: "node-0", Status: "Running", Pod: "p", Device: view.Unknown, DeviceCount: "1"}},
		},
		{
			name: "initializers first, by their container; retried pods of a rank by creation; no phase is Unknown",
			pods: []corev1.Pod{
				pod("n0-new", "node", "0", "", 2*time.Second, nodeContainer(cpu2)),
				pod("n0-old", "node", "0", corev1.PodFailed, time.Second, nodeContainer(cpu2)),
				pod("model", "model-initializer", "0", corev1.PodSucceeded, 0, corev1.Container{Name: "model-initializer"}),
				pod("data", "dataset-initializer", "0", corev1.PodSucceeded, 0, corev1.Container{Name: "dataset-initializer", Resources: limits("cpu", "1")}),
			},
			want: []view.Step{
				{Name: "dataset-initializer", Status: "Succeeded", Pod: "data", Device: "cpu", DeviceCount: "1"},
				{Name: "model-initializer", Status: "Succeeded", Pod: "model", Device: view.Unknown, DeviceCount: view.Unknown},
				{Name: "node-0", Status: "Failed", Pod: "n0-old", Device: "cpu", DeviceCount: "2"},
				{Name: "node-0", Status: "Unknown", Pod: "n0-new", Device: "cpu", DeviceCount: "2"},
			},
		},
		{
			name: "a failed step carries its container's termination message",
			pods: []corev1.Pod{
				func() corev1.Pod {
					p := pod("data", "dataset-initializer", "0", corev1.PodFailed, 0, corev1.Container{Name: "dataset-initializer"})
					p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "dataset-initializer", State: corev1.ContainerState{
						Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: "fetching\ndataset initializer failed: no such object\n"}}}}
					return p
				}(),
				func() corev1.Pod { // a running pod's last message is not shown
					p := pod("n", "node", "0", corev1.PodRunning, 0, nodeContainer(cpu2))
					p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "node", LastTerminationState: corev1.ContainerState{
						Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: "old"}}}}
					return p
				}(),
			},
			want: []view.Step{
				{Name: "dataset-initializer", Status: "Failed", Pod: "data", Device: view.Unknown, DeviceCount: view.Unknown,
					Message: "fetching\ndataset initializer failed: no such object"},
				{Name: "node-0", Status: "Running", Pod: "n", Device: "cpu", DeviceCount: "2"},
			},
		},
		{
			name: "with a launcher, it is node-0 and the nodes count from 1",
			pods: []corev1.Pod{
				pod("w0", "node", "0", corev1.PodRunning, 0, nodeContainer(cpu2)),
				pod("l", "launcher", "0", corev1.PodRunning, 0, corev1.Container{Name: "launcher"}),
				pod("w1", "node", "1", corev1.PodRunning, 0, nodeContainer(cpu2)),
			},
			want: []view.Step{
				{Name: "node-0", Status: "Running", Pod: "l", Device: view.Unknown, DeviceCount: view.Unknown},
				{Name: "node-1", Status: "Running", Pod: "w0", Device: "cpu", DeviceCount: "2"},
				{Name: "node-2", Status: "Running", Pod: "w1", Device: "cpu", DeviceCount: "2"},
			},
		},
		{
			name: "pods of other replicated jobs and node pods without an index are not steps",
			pods: []corev1.Pod{
				pod("other", "evaluator", "0", corev1.PodRunning, 0, nodeContainer(cpu2)),
				pod("noindex", "node", "", corev1.PodRunning, 0, nodeContainer(cpu2)),
			},
			want: []view.Step{},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, trainjob.Steps(tc.pods)); diff != "" {
				t.Errorf("Steps (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStepString(t *testing.T) {
	s := view.Step{Name: "node-0", Status: "Running", Device: "cpu", DeviceCount: "2", Pod: "p"}
	if got, want := s.String(), "Step: node-0, Status: Running, Devices: cpu x 2"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func cond(typ string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg}
}

func TestNewJob(t *testing.T) {
	running := []corev1.Pod{
		pod("a", "node", "0", corev1.PodRunning, 0, nodeContainer(corev1.ResourceRequirements{})),
		pod("b", "node", "1", corev1.PodSucceeded, 0, nodeContainer(corev1.ResourceRequirements{})),
	}
	rt := ptr.To[int32](2)
	base := func(mutate func(*trainer.TrainJob)) *trainer.TrainJob {
		j := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "ns", CreationTimestamp: metav1.NewTime(t0)},
			Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"}}}
		mutate(j)
		return j
	}
	type shown struct {
		NumNodes                int32
		Status, Reason, Message string
	}
	cases := []struct {
		name string
		job  *trainer.TrainJob
		pods []corev1.Pod
		rt   *int32
		want shown
	}{
		{
			name: "Trainyard's phase, reason and message; nodes from the spec",
			job: base(func(j *trainer.TrainJob) {
				j.Spec.Trainer = &trainer.Trainer{NumNodes: ptr.To[int32](3)}
				j.Status = trainer.TrainJobStatus{Phase: trainer.TrainJobPending, Reason: "WaitingForPods", Message: "1/3 nodes running", NumNodes: ptr.To[int32](3)}
			}),
			want: shown{3, "Pending", "WaitingForPods", "1/3 nodes running"},
		},
		{
			name: "nodes from the status, then the runtime",
			job: base(func(j *trainer.TrainJob) {
				j.Status = trainer.TrainJobStatus{Phase: "Running", NumNodes: ptr.To[int32](4)}
			}),
			rt:   rt,
			want: shown{4, "Running", "", ""},
		},
		{
			name: "no phase (another controller): Failed from the condition",
			job: base(func(j *trainer.TrainJob) {
				j.Status.Conditions = []metav1.Condition{cond("Failed", metav1.ConditionTrue, "FailedJobs", "node failed")}
			}),
			rt:   rt,
			want: shown{2, "Failed", "FailedJobs", "node failed"},
		},
		{
			name: "no phase, no conditions, all nodes running or done: Running",
			job:  base(func(*trainer.TrainJob) {}),
			pods: running,
			rt:   rt,
			want: shown{2, "Running", "", ""},
		},
		{
			name: "no phase, no conditions, one node: Created",
			job:  base(func(*trainer.TrainJob) {}),
			pods: running[:1],
			rt:   rt,
			want: shown{2, "Created", "", ""},
		},
		{
			name: "no phase, a condition that is not final: Created",
			job: base(func(j *trainer.TrainJob) {
				j.Status.Conditions = []metav1.Condition{cond("Complete", metav1.ConditionFalse, "", "")}
			}),
			pods: running,
			rt:   rt,
			want: shown{2, "Created", "", ""},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := trainjob.NewJob(tc.job, tc.pods, tc.rt)
			if diff := cmp.Diff(tc.want, shown{j.NumNodes, j.Status, j.Reason, j.Message}); diff != "" {
				t.Errorf("NewJob (-want +got):\n%s", diff)
			}
			if j.Name != "j" || j.Namespace != "ns" || j.Runtime != "torch-distributed" || !j.CreationTimestamp.Equal(&metav1.Time{Time: t0}) {
				t.Errorf("NewJob identity = %s/%s on %s at %v", j.Namespace, j.Name, j.Runtime, j.CreationTimestamp)
			}
		})
	}
}
