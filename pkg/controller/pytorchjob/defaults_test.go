package pytorchjob

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
)

func TestDefaulted(t *testing.T) {
	defaultPort := corev1.ContainerPort{Name: "pytorchjob-port", ContainerPort: 23456}
	cases := map[string]struct {
		job  *kubeflowv1.PyTorchJob
		want func(*kubeflowv1.PyTorchJob)
	}{
		"mnist: cleanPodPolicy, port and nprocPerNode": {
			job: mnist(1),
			want: func(j *kubeflowv1.PyTorchJob) {
				j.Spec.RunPolicy.CleanPodPolicy = ptr.To(kubeflowv1.CleanPodPolicyNone)
				j.Spec.NprocPerNode = ptr.To("auto")
				for _, rs := range j.Spec.PyTorchReplicaSpecs {
					rs.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{defaultPort}
				}
			},
		},
		"replicas and restartPolicy unset; keys in another case": {
			job: mnist(1, func(j *kubeflowv1.PyTorchJob) {
				m, w := j.Spec.PyTorchReplicaSpecs["Master"], j.Spec.PyTorchReplicaSpecs["Worker"]
				m.Replicas, m.RestartPolicy, w.Replicas, w.RestartPolicy = nil, "", nil, ""
				j.Spec.PyTorchReplicaSpecs = map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{"master": m, "WORKER": w}
			}),
			want: func(j *kubeflowv1.PyTorchJob) {
				j.Spec.RunPolicy.CleanPodPolicy = ptr.To(kubeflowv1.CleanPodPolicyNone)
				j.Spec.NprocPerNode = ptr.To("auto")
				for _, rs := range j.Spec.PyTorchReplicaSpecs {
					rs.Replicas, rs.RestartPolicy = ptr.To[int32](1), kubeflowv1.RestartPolicyOnFailure
					rs.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{defaultPort}
				}
			},
		},
		"port goes on the pytorch container, kept when named; explicit values stay": {
			job: mnist(2, func(j *kubeflowv1.PyTorchJob) {
				j.Spec.RunPolicy.CleanPodPolicy = ptr.To(kubeflowv1.CleanPodPolicyAll)
				j.Spec.NprocPerNode = ptr.To("2")
				m := j.Spec.PyTorchReplicaSpecs["Master"]
				m.Template.Spec.Containers = append([]corev1.Container{{Name: "sidecar", Image: "busybox"}}, m.Template.Spec.Containers...)
				w := j.Spec.PyTorchReplicaSpecs["Worker"]
				w.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "pytorchjob-port", ContainerPort: 3000}}
			}),
			want: func(j *kubeflowv1.PyTorchJob) {
				j.Spec.PyTorchReplicaSpecs["Master"].Template.Spec.Containers[1].Ports = []corev1.ContainerPort{defaultPort}
			},
		},
		"elastic: only maxReplicas": {
			job: elastic(4, func(j *kubeflowv1.PyTorchJob) { j.Spec.ElasticPolicy.MinReplicas = nil }),
			want: func(j *kubeflowv1.PyTorchJob) {
				commonDefaults(j)
				j.Spec.ElasticPolicy.MinReplicas = ptr.To[int32](4)
			},
		},
		"elastic: only minReplicas": {
			job: elastic(4, func(j *kubeflowv1.PyTorchJob) { j.Spec.ElasticPolicy.MaxReplicas = nil }),
			want: func(j *kubeflowv1.PyTorchJob) {
				commonDefaults(j)
				j.Spec.ElasticPolicy.MaxReplicas = ptr.To[int32](1)
			},
		},
		"elastic: neither bound takes the worker count": {
			job: elastic(3, func(j *kubeflowv1.PyTorchJob) {
				j.Spec.ElasticPolicy.MinReplicas, j.Spec.ElasticPolicy.MaxReplicas = nil, nil
			}),
			want: func(j *kubeflowv1.PyTorchJob) {
				commonDefaults(j)
				j.Spec.ElasticPolicy.MinReplicas, j.Spec.ElasticPolicy.MaxReplicas = ptr.To[int32](3), ptr.To[int32](3)
			},
		},
		"elastic: the deprecated nProcPerNode suppresses the nprocPerNode default": {
			job: elastic(2, func(j *kubeflowv1.PyTorchJob) { j.Spec.ElasticPolicy.NProcPerNode = ptr.To[int32](4) }),
			want: func(j *kubeflowv1.PyTorchJob) {
				commonDefaults(j)
				j.Spec.NprocPerNode = nil
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := tc.job.DeepCopy()
			got := Defaulted(tc.job)
			want := before.DeepCopy()
			if _, ok := want.Spec.PyTorchReplicaSpecs["master"]; ok {
				want.Spec.PyTorchReplicaSpecs = map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{
					"Master": want.Spec.PyTorchReplicaSpecs["master"], "Worker": want.Spec.PyTorchReplicaSpecs["WORKER"]}
			}
			tc.want(want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Defaulted (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tc.job); diff != "" {
				t.Errorf("Defaulted changed its input (-before +after):\n%s", diff)
			}
		})
	}
}

func commonDefaults(j *kubeflowv1.PyTorchJob) {
	j.Spec.RunPolicy.CleanPodPolicy = ptr.To(kubeflowv1.CleanPodPolicyNone)
	j.Spec.NprocPerNode = ptr.To("auto")
	for _, rs := range j.Spec.PyTorchReplicaSpecs {
		rs.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "pytorchjob-port", ContainerPort: 23456}}
	}
}

// Default stores Defaulted's rules except the two that must stay in memory,
// and the controller's Defaulted gives the same job whether or not the stored
// object went through Default.
func TestDefault(t *testing.T) {
	cases := map[string]struct {
		job  *kubeflowv1.PyTorchJob
		want func(*kubeflowv1.PyTorchJob)
	}{
		"mnist: as Defaulted": {
			job:  mnist(1),
			want: commonDefaults,
		},
		"keys in another case are defaulted, not renamed": {
			job: mnist(1, func(j *kubeflowv1.PyTorchJob) {
				m, w := j.Spec.PyTorchReplicaSpecs["Master"], j.Spec.PyTorchReplicaSpecs["Worker"]
				m.Replicas, m.RestartPolicy = nil, ""
				j.Spec.PyTorchReplicaSpecs = map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{"master": m, "WORKER": w}
			}),
			want: func(j *kubeflowv1.PyTorchJob) {
				commonDefaults(j)
				j.Spec.PyTorchReplicaSpecs["master"].Replicas = ptr.To[int32](1)
				j.Spec.PyTorchReplicaSpecs["master"].RestartPolicy = kubeflowv1.RestartPolicyOnFailure
			},
		},
		"elastic: only maxReplicas": {
			job: elastic(4, func(j *kubeflowv1.PyTorchJob) { j.Spec.ElasticPolicy.MinReplicas = nil }),
			want: func(j *kubeflowv1.PyTorchJob) {
				commonDefaults(j)
				j.Spec.ElasticPolicy.MinReplicas = ptr.To[int32](4)
			},
		},
		"elastic: bounds from the worker count stay unset": {
			job: elastic(3, func(j *kubeflowv1.PyTorchJob) {
				j.Spec.ElasticPolicy.MinReplicas, j.Spec.ElasticPolicy.MaxReplicas = nil, nil
			}),
			want: commonDefaults,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := tc.job.DeepCopy()
			Default(got)
			want := tc.job.DeepCopy()
			tc.want(want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Default (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(Defaulted(tc.job), Defaulted(got)); diff != "" {
				t.Errorf("Defaulted of the stored job differs from Defaulted of the job as written (-written +stored):\n%s", diff)
			}
			again := got.DeepCopy()
			Default(again)
			if diff := cmp.Diff(got, again); diff != "" {
				t.Errorf("Default is not idempotent (-once +twice):\n%s", diff)
			}
		})
	}
}
