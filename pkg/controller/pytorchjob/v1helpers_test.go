package pytorchjob

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
)

// replica is a ReplicaSpec as the Kubeflow mnist example writes it.
func replica(n int32, policy kubeflowv1.RestartPolicy) *kubeflowv1.ReplicaSpec {
	return &kubeflowv1.ReplicaSpec{
		Replicas:      ptr.To(n),
		RestartPolicy: policy,
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"sidecar.istio.io/inject": "false"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name:  "pytorch",
				Image: "kubeflow/pytorch-dist-mnist:latest",
				Args:  []string{"--backend", "nccl"},
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
					"nvidia.com/gpu": resource.MustParse("1"),
				}},
			}}},
		},
	}
}

// mnist is the mnist example with one Master and `workers` Workers.
func mnist(workers int32, mutate ...func(*kubeflowv1.PyTorchJob)) *kubeflowv1.PyTorchJob {
	job := &kubeflowv1.PyTorchJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: "kubeflow.org/v1", Kind: "PyTorchJob"},
		ObjectMeta: metav1.ObjectMeta{Name: "mnist", Namespace: "ns", UID: "uid-1"},
		Spec: kubeflowv1.PyTorchJobSpec{PyTorchReplicaSpecs: map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{
			kubeflowv1.PyTorchJobReplicaTypeMaster: replica(1, kubeflowv1.RestartPolicyOnFailure),
			kubeflowv1.PyTorchJobReplicaTypeWorker: replica(workers, kubeflowv1.RestartPolicyOnFailure),
		}},
	}
	for _, m := range mutate {
		m(job)
	}
	return job
}

// elastic is a worker-only elastic job.
func elastic(workers int32, mutate ...func(*kubeflowv1.PyTorchJob)) *kubeflowv1.PyTorchJob {
	job := mnist(workers, func(j *kubeflowv1.PyTorchJob) {
		delete(j.Spec.PyTorchReplicaSpecs, kubeflowv1.PyTorchJobReplicaTypeMaster)
		j.Spec.ElasticPolicy = &kubeflowv1.ElasticPolicy{MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To(workers), MaxRestarts: ptr.To[int32](3)}
	})
	for _, m := range mutate {
		m(job)
	}
	return job
}

func env(kv ...string) []corev1.EnvVar {
	var out []corev1.EnvVar
	for i := 0; i < len(kv); i += 2 {
		out = append(out, corev1.EnvVar{Name: kv[i], Value: kv[i+1]})
	}
	return out
}
