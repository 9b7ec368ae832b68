package pytorchjob

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/controller/pytorchjob"
)

// The Kubeflow mnist examples apply unchanged and become a JobSet with a
// master and a worker-0 replicated job, each pod with v1's environment, and a
// headless Service per replica so that MASTER_ADDR resolves.
func TestMnistExamples(t *testing.T) {
	for _, backend := range []string{"nccl", "gloo"} {
		t.Run(backend, func(t *testing.T) {
			ns := newNamespace(t)
			name := applyExample(t, ns, "examples/pytorchjob/pytorch_job_mnist_"+backend+".yaml")[0]
			require.Equal(t, "pytorch-dist-mnist-"+backend, name)

			js := waitJobSet(t, ns, name)
			job := getJob(t, ns, name)
			require.Equal(t, []metav1.OwnerReference{{APIVersion: "kubeflow.org/v1", Kind: "PyTorchJob", Name: name, UID: job.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}, js.OwnerReferences)
			require.False(t, *js.Spec.Suspend)

			master := "MASTER_ADDR=" + name + "-master-0"
			petMaster := "PET_MASTER_ADDR=" + name + "-master-0"
			for rjob, rank := range map[string]string{"master": "0", "worker-0": "1"} {
				pod := replicatedJob(t, js, rjob).Template.Spec.Template
				require.Len(t, pod.Spec.Containers, 1)
				ctr := pod.Spec.Containers[0]
				require.Equal(t, []string{"--backend", backend}, ctr.Args)
				require.Equal(t, corev1.RestartPolicyOnFailure, pod.Spec.RestartPolicy)
				require.Equal(t, "false", pod.Annotations["sidecar.istio.io/inject"])
				require.Equal(t, []corev1.ContainerPort{{Name: "pytorchjob-port", ContainerPort: 23456, Protocol: corev1.ProtocolTCP}}, ctr.Ports)
				if diff := cmp.Diff([]string{"PYTHONUNBUFFERED=1", "MASTER_PORT=23456", "PET_MASTER_PORT=23456", master, petMaster,
					"WORLD_SIZE=2", "RANK=" + rank, "PET_NODE_RANK=" + rank, "PET_NPROC_PER_NODE=auto", "PET_NNODES=2"}, envOf(ctr)); diff != "" {
					t.Errorf("%s env (-want +got):\n%s", rjob, diff)
				}
			}

			for i, rtype := range []string{"master", "worker"} {
				var svc corev1.Service
				require.NoError(t, c.Get(ctx(), client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("%s-%s-0", name, rtype)}, &svc))
				require.Equal(t, corev1.ClusterIPNone, svc.Spec.ClusterIP)
				require.True(t, svc.Spec.PublishNotReadyAddresses)
				require.Equal(t, map[string]string{
					"training.kubeflow.org/job-name": name, "training.kubeflow.org/operator-name": "pytorchjob-controller",
					"training.kubeflow.org/replica-type": rtype, "training.kubeflow.org/replica-index": "0",
				}, svc.Spec.Selector, "Service %d", i)
				require.Equal(t, []corev1.ServicePort{{Name: "pytorchjob-port", Port: 23456, Protocol: corev1.ProtocolTCP,
					TargetPort: intstr.FromInt32(23456)}}, svc.Spec.Ports)
				require.Equal(t, job.UID, metav1.GetControllerOf(&svc).UID)
			}

			job = waitCondition(t, ns, name, kubeflowv1.JobCreated, corev1.ConditionTrue, pytorchjob.ReasonCreated)
			require.Equal(t, "PyTorchJob "+name+" is created.", job.Status.Conditions[0].Message)
			require.Equal(t, "Created", state(job))
			require.NotNil(t, job.Status.StartTime)
			require.Equal(t, map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaStatus{
				"Master": {Selector: "training.kubeflow.org/job-name=" + name + ",training.kubeflow.org/operator-name=pytorchjob-controller,training.kubeflow.org/replica-type=master"},
				"Worker": {Selector: "training.kubeflow.org/job-name=" + name + ",training.kubeflow.org/operator-name=pytorchjob-controller,training.kubeflow.org/replica-type=worker"},
			}, job.Status.ReplicaStatuses)
			// The stored object keeps what the user wrote: defaults live in memory.
			require.Nil(t, job.Spec.RunPolicy.CleanPodPolicy)
			require.Nil(t, job.Spec.NprocPerNode)
			require.Empty(t, job.Spec.PyTorchReplicaSpecs["Master"].Template.Spec.Containers[0].Ports)
		})
	}
}

// Pods carry v1's labels: those of the template from creation, and
// job-name=<job>, which the API server does not allow in a Job's template, once
// the controller has relabelled them.
func TestPodLabels(t *testing.T) {
	ns := newNamespace(t)
	name := applyExample(t, ns, "examples/pytorchjob/pytorch_job_mnist_gloo.yaml")[0]
	js := waitJobSet(t, ns, name)
	masterPod, _ := createPod(t, js, "master", 0)
	require.Equal(t, name+"-master-0", masterPod.Labels["job-name"], "the Job controller's label, before the controller relabels")
	createPod(t, js, "worker-0", 0)

	eventually(t, func() error {
		var pods corev1.PodList
		if err := c.List(ctx(), &pods, client.InNamespace(ns), client.MatchingLabels{"job-name": name}); err != nil {
			return err
		}
		if len(pods.Items) != 2 {
			return fmt.Errorf("kubectl get pods -l job-name=%s finds %d pods, want 2", name, len(pods.Items))
		}
		return nil
	})
	var pod corev1.Pod
	require.NoError(t, c.Get(ctx(), client.ObjectKeyFromObject(masterPod), &pod))
	for k, v := range map[string]string{
		"training.kubeflow.org/job-name": name, "training.kubeflow.org/operator-name": "pytorchjob-controller",
		"training.kubeflow.org/replica-type": "master", "training.kubeflow.org/replica-index": "0", "training.kubeflow.org/job-role": "master",
		"job-name": name, "group-name": "kubeflow.org", "replica-type": "master", "replica-index": "0", "job-role": "master",
		"pytorch_job_name": name,
		// The Job's own labels stay.
		"batch.kubernetes.io/job-name": name + "-master-0",
	} {
		require.Equal(t, v, pod.Labels[k], "label %s", k)
	}
	var workers corev1.PodList
	require.NoError(t, c.List(ctx(), &workers, client.InNamespace(ns), client.MatchingLabels{"replica-type": "worker", "replica-index": "0"}))
	require.Len(t, workers.Items, 1)
}

// A worker-only elastic job runs one Job per worker, as any job does, and
// each worker has v1's host name: worker 0's, pytorch-elastic-worker-0, is the
// rendezvous endpoint's host, so torchrun's agent there hosts the c10d store;
// the others find it through the Service of that name.
func TestElastic(t *testing.T) {
	ns := newNamespace(t)
	applyExample(t, ns, "examples/pytorchjob/pytorch_job_elastic.yaml")
	js := waitJobSet(t, ns, "pytorch-elastic")
	require.Len(t, js.Spec.ReplicatedJobs, 3)
	for i := range 3 {
		rj := replicatedJob(t, js, fmt.Sprintf("worker-%d", i))
		require.Equal(t, batchv1.NonIndexedCompletion, *rj.Template.Spec.CompletionMode)
		require.Equal(t, fmt.Sprintf("pytorch-elastic-worker-%d", i), rj.Template.Spec.Template.Spec.Hostname)
		if diff := cmp.Diff([]string{"PYTHONUNBUFFERED=1", "PET_NPROC_PER_NODE=1", "PET_RDZV_ENDPOINT=pytorch-elastic-worker-0:23456",
			"PET_RDZV_BACKEND=c10d", "PET_NNODES=2:3", "PET_MAX_RESTARTS=10"}, envOf(rj.Template.Spec.Template.Spec.Containers[0])); diff != "" {
			t.Errorf("worker-%d env (-want +got):\n%s", i, diff)
		}
		var svc corev1.Service
		require.NoError(t, c.Get(ctx(), client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("pytorch-elastic-worker-%d", i)}, &svc))
		require.Equal(t, fmt.Sprint(i), svc.Spec.Selector["training.kubeflow.org/replica-index"])
	}
	p0, _ := createPod(t, js, "worker-0", 0)
	p2, _ := createPod(t, js, "worker-2", 0)
	eventually(t, func() error {
		for pod, want := range map[*corev1.Pod]map[string]string{
			p0: {"training.kubeflow.org/replica-index": "0", "replica-index": "0", "training.kubeflow.org/job-role": "master", "job-name": "pytorch-elastic"},
			p2: {"training.kubeflow.org/replica-index": "2", "replica-index": "2", "training.kubeflow.org/job-role": "", "job-name": "pytorch-elastic"},
		} {
			var cur corev1.Pod
			if err := c.Get(ctx(), client.ObjectKeyFromObject(pod), &cur); err != nil {
				return err
			}
			for k, v := range want {
				if cur.Labels[k] != v {
					return fmt.Errorf("pod %s: label %s=%q, want %q", pod.Name, k, cur.Labels[k], v)
				}
			}
		}
		return nil
	})
}

// Jobs v1 would have rejected fail with the field at fault; nothing is created.
func TestInvalidJobFails(t *testing.T) {
	ns := newNamespace(t)
	job := &kubeflowv1.PyTorchJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "two-masters"},
		Spec: kubeflowv1.PyTorchJobSpec{PyTorchReplicaSpecs: map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{"Master": {
			Replicas: ptr.To[int32](2),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "trainer", Image: "x"}}}},
		}}},
	}
	require.NoError(t, c.Create(ctx(), job))
	got := waitCondition(t, ns, "two-masters", kubeflowv1.JobFailed, corev1.ConditionTrue, pytorchjob.ReasonFailedValidation)
	msg := pytorchjob.FindCondition(&got.Status, kubeflowv1.JobFailed).Message
	for _, want := range []string{"spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1",
		"spec.pytorchReplicaSpecs[Master].template.spec.containers: Required value: must have at least one container with name pytorch"} {
		require.True(t, strings.Contains(msg, want), "message %q lacks %q", msg, want)
	}
	require.NotNil(t, got.Status.CompletionTime)
	require.Equal(t, "Failed", state(got))
	err := c.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "two-masters"}, &jobsetv1alpha2.JobSet{})
	require.True(t, apierrors.IsNotFound(err), "a JobSet exists for an invalid job (err=%v)", err)
}

// A job that MultiKueue manages is left alone.
func TestManagedByMultiKueue(t *testing.T) {
	ns := newNamespace(t)
	require.NoError(t, c.Create(ctx(), mnistJob(ns, "remote", func(j *kubeflowv1.PyTorchJob) {
		j.Spec.RunPolicy.ManagedBy = ptr.To(kubeflowv1.MultiKueueController)
	})))
	require.NoError(t, c.Create(ctx(), mnistJob(ns, "local")))
	waitJobSet(t, ns, "local") // the controller has seen both
	consistently(t, 2*time.Second, func() error {
		if err := c.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "remote"}, &jobsetv1alpha2.JobSet{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("a JobSet exists for a MultiKueue job (err=%v)", err)
		}
		if got := getJob(t, ns, "remote"); len(got.Status.Conditions) > 0 {
			return fmt.Errorf("status written: %+v", got.Status)
		}
		return nil
	})
}

// `kubectl scale pytorchjob --replicas` and an HPA use the scale subresource:
// the Worker replicas, active workers, and the workers' selector.
func TestScaleSubresource(t *testing.T) {
	ns := newNamespace(t)
	name := applyExample(t, ns, "examples/pytorchjob/pytorch_job_mnist_nccl.yaml")[0]
	waitCondition(t, ns, name, kubeflowv1.JobCreated, corev1.ConditionTrue, "")
	var scale autoscalingv1.Scale
	require.NoError(t, c.SubResource("scale").Get(ctx(), getJob(t, ns, name), &scale))
	require.Equal(t, int32(1), scale.Spec.Replicas)
	require.Equal(t, "training.kubeflow.org/job-name="+name+",training.kubeflow.org/operator-name=pytorchjob-controller,training.kubeflow.org/replica-type=worker", scale.Status.Selector)

	scale.Spec.Replicas = 3
	require.NoError(t, c.SubResource("scale").Update(ctx(), getJob(t, ns, name), client.WithSubResourceBody(&scale)))
	require.Equal(t, int32(3), *getJob(t, ns, name).Spec.PyTorchReplicaSpecs["Worker"].Replicas)
}
