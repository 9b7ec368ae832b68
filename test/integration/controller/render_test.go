package controller

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// The shipped runtime and example apply unchanged and give one JobSet named after
// the TrainJob whose node job runs node-0 and node-1 configured for torchrun.
func TestExampleRendersToJobSet(t *testing.T) {
	ns := newNamespace(t)
	applyFile(t, ns, "runtimes/torch-distributed.yaml")
	applyFile(t, ns, "examples/trainjob-torch.yaml")

	js := waitJobSet(t, ns, "torch-allreduce")
	job := waitCreated(t, ns, "torch-allreduce")
	require.Equal(t, trainer.TrainJobPending, job.Status.Phase)

	require.Len(t, js.Spec.ReplicatedJobs, 1)
	rj := js.Spec.ReplicatedJobs[0]
	require.Equal(t, "node", rj.Name)
	require.Equal(t, int32(1), rj.Replicas)
	require.Equal(t, ptr.To[int32](2), rj.Template.Spec.Parallelism)
	require.Equal(t, ptr.To[int32](2), rj.Template.Spec.Completions)
	require.Equal(t, "trainer", rj.Template.Labels[trainer.AncestorLabel])
	require.Equal(t, ptr.To(false), js.Spec.Suspend)

	c := trainerContainer(t, js)
	want := map[string]string{
		"PET_NNODES":         "2",
		"PET_NPROC_PER_NODE": "1",
		"PET_NODE_RANK":      "fieldRef:metadata.annotations['batch.kubernetes.io/job-completion-index']",
		"PET_MASTER_ADDR":    "torch-allreduce-node-0-0.torch-allreduce",
		"PET_MASTER_PORT":    "29500",
	}
	if diff := cmp.Diff(want, envOf(c)); diff != "" {
		t.Errorf("node env (-want +got):\n%s", diff)
	}
	require.Equal(t, []corev1.ContainerPort{{ContainerPort: 29500, Protocol: corev1.ProtocolTCP}}, c.Ports)
	require.Equal(t, "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime", c.Image)
	require.Equal(t, resource.MustParse("1"), c.Resources.Requests[corev1.ResourceCPU])

	ref := metav1.GetControllerOf(js)
	require.NotNil(t, ref)
	require.Equal(t, job.UID, ref.UID)
	require.Equal(t, ptr.To(true), ref.BlockOwnerDeletion)

	// Every node running → Running; the JobSet completing → Complete, with its reason.
	setJobSetStatus(t, js, func(s *jobsetv1alpha2.JobSetStatus) {
		s.ReplicatedJobsStatus = []jobsetv1alpha2.ReplicatedJobStatus{{Name: "node", Ready: 1, Active: 1}}
	})
	waitPhase(t, ns, "torch-allreduce", trainer.TrainJobRunning)
	setJobSetStatus(t, js, func(s *jobsetv1alpha2.JobSetStatus) {
		s.ReplicatedJobsStatus = []jobsetv1alpha2.ReplicatedJobStatus{{Name: "node", Succeeded: 1}}
		s.Conditions = []metav1.Condition{{Type: string(jobsetv1alpha2.JobSetCompleted), Status: metav1.ConditionTrue,
			Reason: "AllJobsCompleted", Message: "jobset completed successfully", LastTransitionTime: metav1.Now()}}
	})
	job = waitCondition(t, ns, "torch-allreduce", trainer.TrainJobComplete, metav1.ConditionTrue, "AllJobsCompleted")
	require.Equal(t, "jobset completed successfully", findCond(job, trainer.TrainJobComplete).Message)
	waitPhase(t, ns, "torch-allreduce", trainer.TrainJobCompletePhase)
	job = getTrainJob(t, ns, "torch-allreduce")
	require.Equal(t, []trainer.JobStatus{{Name: "node", Ready: ptr.To[int32](0), Succeeded: ptr.To[int32](1),
		Failed: ptr.To[int32](0), Active: ptr.To[int32](0), Suspended: ptr.To[int32](0)}}, job.Status.JobsStatus)
}

func findCond(job *trainer.TrainJob, t string) *metav1.Condition {
	for i := range job.Status.Conditions {
		if job.Status.Conditions[i].Type == t {
			return &job.Status.Conditions[i]
		}
	}
	return nil
}

func torchJob(ns, name string, mutate func(*trainer.TrainJob)) *trainer.TrainJob {
	job := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"},
			Trainer: &trainer.Trainer{
				Image:   ptr.To("example.com/train:v1"),
				Command: []string{"torchrun", "/app/train.py"},
			},
		},
	}
	if mutate != nil {
		mutate(job)
	}
	return job
}

// The node count reaches the JobSet's parallelism and torchrun's PET_NNODES.
func TestNodeCounts(t *testing.T) {
	ns := newNamespace(t)
	applyFile(t, ns, "runtimes/torch-distributed.yaml")
	for _, n := range []int32{1, 2, 4} {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) {
			name := fmt.Sprintf("nodes-%d", n)
			require.NoError(t, env.Client.Create(ctx(), torchJob(ns, name, func(j *trainer.TrainJob) {
				j.Spec.Trainer.NumNodes = ptr.To(n)
			})))
			js := waitJobSet(t, ns, name)
			spec := js.Spec.ReplicatedJobs[0].Template.Spec
			require.Equal(t, n, *spec.Parallelism)
			require.Equal(t, n, *spec.Completions)
			require.Equal(t, fmt.Sprint(n), envOf(trainerContainer(t, js))["PET_NNODES"])
		})
	}
}

// numProcPerNode "auto" counts GPUs when there are any, else CPUs, from the
// runtime's resources merged with the TrainJob's.
func TestProcPerNodeCPUAndGPU(t *testing.T) {
	ns := newNamespace(t)
	applyFile(t, ns, "runtimes/torch-distributed.yaml")
	applyFile(t, ns, "test/integration/controller/testdata/runtime-with-sidecar.yaml")
	cases := map[string]struct {
		runtime   string
		resources corev1.ResourceList
		nproc     *intstr.IntOrString
		want      string
	}{
		"cpu request":              {runtime: "torch-distributed", resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}, want: "4"},
		"fractional cpu rounds up": {runtime: "torch-distributed", resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}, want: "2"},
		"gpu":                      {runtime: "torch-distributed", resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), "nvidia.com/gpu": resource.MustParse("2")}, want: "2"},
		"gpu from runtime only":    {runtime: "it-torch-with-sidecar", resources: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi")}, want: "2"},
		"explicit int wins":        {runtime: "it-torch-with-sidecar", nproc: ptr.To(intstr.FromInt32(1)), want: "1"},
		"cpu string":               {runtime: "torch-distributed", resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3"), "nvidia.com/gpu": resource.MustParse("1")}, nproc: ptr.To(intstr.FromString("cpu")), want: "3"},
	}
	i := 0
	for name, tc := range cases {
		i++
		jobName := fmt.Sprintf("nproc-%d", i)
		t.Run(name, func(t *testing.T) {
			require.NoError(t, env.Client.Create(ctx(), torchJob(ns, jobName, func(j *trainer.TrainJob) {
				j.Spec.RuntimeRef.Name = tc.runtime
				j.Spec.Trainer.NumProcPerNode = tc.nproc
				if tc.resources != nil {
					j.Spec.Trainer.ResourcesPerNode = &corev1.ResourceRequirements{Requests: tc.resources}
				}
			})))
			js := waitJobSet(t, ns, jobName)
			require.Equal(t, tc.want, envOf(trainerContainer(t, js))["PET_NPROC_PER_NODE"])
		})
	}
}

// A TrainJob in the Kubeflow Trainer v2.1 shape (labels, annotations,
// podTemplateOverrides) and the same intent in the v2.3 shape (runtimePatches)
// give the same JobSet.
func TestBothOverrideFormsGiveTheSameJobSet(t *testing.T) {
	nsA, nsB := newNamespace(t), newNamespace(t)
	applyFile(t, nsA, "test/integration/controller/testdata/runtime-with-sidecar.yaml")
	applyFile(t, nsA, "test/integration/controller/testdata/trainjob-v21.yaml")
	applyFile(t, nsB, "test/integration/controller/testdata/trainjob-v23.yaml")
	a, b := waitJobSet(t, nsA, "same-job"), waitJobSet(t, nsB, "same-job")

	if diff := cmp.Diff(a.Spec, b.Spec); diff != "" {
		t.Errorf("JobSet spec differs between v2.1 and v2.3 forms (-v2.1 +v2.3):\n%s", diff)
	}
	if diff := cmp.Diff(a.Labels, b.Labels); diff != "" {
		t.Errorf("JobSet labels differ (-v2.1 +v2.3):\n%s", diff)
	}
	if diff := cmp.Diff(a.Annotations, b.Annotations); diff != "" {
		t.Errorf("JobSet annotations differ (-v2.1 +v2.3):\n%s", diff)
	}
	// And the overrides really landed.
	require.Equal(t, "user-queue", a.Labels["kueue.x-k8s.io/queue-name"])
	require.Equal(t, "research", a.Labels["team"])
	require.Equal(t, "alice", a.Annotations["example.com/owner"])
	pod := a.Spec.ReplicatedJobs[0].Template.Spec.Template
	require.Equal(t, "trainer", pod.Labels["example.com/pod"])
	require.Equal(t, map[string]string{"cloud.example.com/accelerator": "a100"}, pod.Spec.NodeSelector)
	// Tolerations are a union: the runtime's own stays, the override's is added.
	require.Len(t, pod.Spec.Tolerations, 2)
	require.Equal(t, "kwok.x-k8s.io/node", pod.Spec.Tolerations[0].Key)
	require.Equal(t, "nvidia.com/gpu", pod.Spec.Tolerations[1].Key)
	logger := pod.Spec.Containers[1]
	require.Equal(t, "logger", logger.Name)
	require.Equal(t, []corev1.EnvVar{{Name: "LEVEL", Value: "debug"}}, logger.Env)
	require.Equal(t, "/data", logger.VolumeMounts[0].MountPath)
	// The runtime's GPU limit survives the TrainJob's memory request.
	node := pod.Spec.Containers[0]
	require.Equal(t, resource.MustParse("2"), node.Resources.Limits["nvidia.com/gpu"])
	require.Equal(t, resource.MustParse("2"), node.Resources.Requests["nvidia.com/gpu"])
	require.Equal(t, resource.MustParse("8Gi"), node.Resources.Requests[corev1.ResourceMemory])
}
