package pytorchjob

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
)

// pytorchJob is the Kubeflow mnist example as a user writes it, without
// defaults: a Master (replicas 1) and two Workers.
func pytorchJob(mutate ...func(*kubeflowv1.PyTorchJob)) *kubeflowv1.PyTorchJob {
	replica := func(n int32) *kubeflowv1.ReplicaSpec {
		return &kubeflowv1.ReplicaSpec{Replicas: ptr.To(n), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "pytorch", Image: "kubeflow/pytorch-dist-mnist:latest"}},
		}}}
	}
	j := &kubeflowv1.PyTorchJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mnist"},
		Spec: kubeflowv1.PyTorchJobSpec{PyTorchReplicaSpecs: map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{
			kubeflowv1.PyTorchJobReplicaTypeMaster: replica(1),
			kubeflowv1.PyTorchJobReplicaTypeWorker: replica(2),
		}},
	}
	for _, m := range mutate {
		m(j)
	}
	return j
}

var defaultPorts = []corev1.ContainerPort{{Name: "pytorchjob-port", ContainerPort: 23456}}

// v1Defaults are the defaults the mnist example gets.
func v1Defaults(j *kubeflowv1.PyTorchJob) {
	j.Spec.RunPolicy.CleanPodPolicy = ptr.To(kubeflowv1.CleanPodPolicyNone)
	j.Spec.NprocPerNode = ptr.To("auto")
	for _, rs := range j.Spec.PyTorchReplicaSpecs {
		rs.RestartPolicy = kubeflowv1.RestartPolicyOnFailure
		rs.Template.Spec.Containers[0].Ports = defaultPorts
	}
}

func TestDefaulter(t *testing.T) {
	cases := map[string]struct {
		job  *kubeflowv1.PyTorchJob
		want *kubeflowv1.PyTorchJob
	}{
		"v1's defaults": {
			job:  pytorchJob(),
			want: pytorchJob(v1Defaults),
		},
		"replicas of a Worker; what the user set stays": {
			job: pytorchJob(func(j *kubeflowv1.PyTorchJob) {
				j.Spec.RunPolicy.CleanPodPolicy = ptr.To(kubeflowv1.CleanPodPolicyAll)
				j.Spec.PyTorchReplicaSpecs["Worker"].Replicas = nil
				j.Spec.PyTorchReplicaSpecs["Worker"].RestartPolicy = kubeflowv1.RestartPolicyExitCode
			}),
			want: pytorchJob(v1Defaults, func(j *kubeflowv1.PyTorchJob) {
				j.Spec.RunPolicy.CleanPodPolicy = ptr.To(kubeflowv1.CleanPodPolicyAll)
				j.Spec.PyTorchReplicaSpecs["Worker"].Replicas = ptr.To[int32](1)
				j.Spec.PyTorchReplicaSpecs["Worker"].RestartPolicy = kubeflowv1.RestartPolicyExitCode
			}),
		},
		"replica type keys keep the user's case": {
			job: pytorchJob(func(j *kubeflowv1.PyTorchJob) {
				s := j.Spec.PyTorchReplicaSpecs
				j.Spec.PyTorchReplicaSpecs = map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{"master": s["Master"], "worker": s["Worker"]}
			}),
			want: pytorchJob(v1Defaults, func(j *kubeflowv1.PyTorchJob) {
				s := j.Spec.PyTorchReplicaSpecs
				j.Spec.PyTorchReplicaSpecs = map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{"master": s["Master"], "worker": s["Worker"]}
			}),
		},
		"elastic bounds from the worker count stay in memory; one bound defaults the other": {
			job: pytorchJob(func(j *kubeflowv1.PyTorchJob) {
				delete(j.Spec.PyTorchReplicaSpecs, "Master")
				j.Spec.ElasticPolicy = &kubeflowv1.ElasticPolicy{MaxRestarts: ptr.To[int32](3)}
			}),
			want: pytorchJob(func(j *kubeflowv1.PyTorchJob) {
				delete(j.Spec.PyTorchReplicaSpecs, "Master")
				j.Spec.ElasticPolicy = &kubeflowv1.ElasticPolicy{MaxRestarts: ptr.To[int32](3)}
			}, v1Defaults),
		},
		"elastic: maxReplicas alone sets minReplicas": {
			job: pytorchJob(func(j *kubeflowv1.PyTorchJob) {
				delete(j.Spec.PyTorchReplicaSpecs, "Master")
				j.Spec.ElasticPolicy = &kubeflowv1.ElasticPolicy{MaxReplicas: ptr.To[int32](4)}
			}),
			want: pytorchJob(func(j *kubeflowv1.PyTorchJob) {
				delete(j.Spec.PyTorchReplicaSpecs, "Master")
				j.Spec.ElasticPolicy = &kubeflowv1.ElasticPolicy{MinReplicas: ptr.To[int32](4), MaxReplicas: ptr.To[int32](4)}
			}, v1Defaults),
		},
		"an invalid job is left as written for the validator to reject": {
			job:  pytorchJob(func(j *kubeflowv1.PyTorchJob) { j.Spec.PyTorchReplicaSpecs["Master"].Replicas = nil }),
			want: pytorchJob(func(j *kubeflowv1.PyTorchJob) { j.Spec.PyTorchReplicaSpecs["Master"].Replicas = nil }),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := tc.job.DeepCopy()
			if err := (Defaulter{}).Default(context.Background(), got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("defaulted job (-want +got):\n%s", diff)
			}
		})
	}
}

// causes returns the field causes of an Invalid status error (nil: no error).
func causes(t *testing.T, err error) []metav1.StatusCause {
	t.Helper()
	if err == nil {
		return nil
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("want an Invalid status error, got %T: %v", err, err)
	}
	return err.(apierrors.APIStatus).Status().Details.Causes
}

// withMetrics gives the job an elastic policy that scales the workers on CPU
// use, as v1's HPA would have.
func withMetrics(j *kubeflowv1.PyTorchJob) {
	j.Spec.ElasticPolicy = &kubeflowv1.ElasticPolicy{MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](4),
		Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
			Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](80)}}}}}
}

const metricsIgnored = "spec.elasticPolicy.metrics is ignored: Trainyard creates no HorizontalPodAutoscaler, " +
	"so the workers are not scaled by these metrics and stay at spec.pytorchReplicaSpecs[Worker].replicas"

func TestValidator(t *testing.T) {
	containers := "spec.pytorchReplicaSpecs[Worker].template.spec.containers"
	cases := map[string]struct {
		old, job     *kubeflowv1.PyTorchJob // old nil: a create
		wantCauses   []metav1.StatusCause
		wantWarnings []string
	}{
		"the mnist example":            {job: pytorchJob()},
		"the mnist example, defaulted": {job: pytorchJob(v1Defaults)},
		"Master with replicas 2": {
			job:        pytorchJob(func(j *kubeflowv1.PyTorchJob) { j.Spec.PyTorchReplicaSpecs["Master"].Replicas = ptr.To[int32](2) }),
			wantCauses: []metav1.StatusCause{{Type: metav1.CauseTypeForbidden, Message: "Forbidden: must be 1", Field: "spec.pytorchReplicaSpecs[Master].replicas"}},
		},
		"Worker without a pytorch container": {
			job: pytorchJob(func(j *kubeflowv1.PyTorchJob) {
				j.Spec.PyTorchReplicaSpecs["Worker"].Template.Spec.Containers[0].Name = "main"
			}),
			wantCauses: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueRequired, Message: "Required value: must have at least one container with name pytorch", Field: containers}},
		},
		"deprecated elasticPolicy.nProcPerNode is a warning": {
			job: pytorchJob(func(j *kubeflowv1.PyTorchJob) {
				j.Spec.ElasticPolicy = &kubeflowv1.ElasticPolicy{NProcPerNode: ptr.To[int32](2)}
			}),
			wantWarnings: []string{"spec.elasticPolicy.nProcPerNode is deprecated, use spec.nprocPerNode instead"},
		},
		"elasticPolicy.metrics: accepted, with a warning that no HPA is created": {
			job:          pytorchJob(withMetrics),
			wantWarnings: []string{metricsIgnored},
		},
		"elasticPolicy without metrics: no warning": {
			job: pytorchJob(func(j *kubeflowv1.PyTorchJob) {
				j.Spec.ElasticPolicy = &kubeflowv1.ElasticPolicy{MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](2)}
			}),
		},
		"update: elasticPolicy.metrics is warned about on every update": {
			old: pytorchJob(withMetrics),
			job: pytorchJob(withMetrics, func(j *kubeflowv1.PyTorchJob) {
				j.Spec.PyTorchReplicaSpecs["Worker"].Replicas = ptr.To[int32](3)
			}),
			wantWarnings: []string{metricsIgnored},
		},
		"update: an invalid job with metrics gets both": {
			old:          pytorchJob(withMetrics),
			job:          pytorchJob(withMetrics, func(j *kubeflowv1.PyTorchJob) { j.Spec.PyTorchReplicaSpecs["Master"].Replicas = ptr.To[int32](2) }),
			wantCauses:   []metav1.StatusCause{{Type: metav1.CauseTypeForbidden, Message: "Forbidden: must be 1", Field: "spec.pytorchReplicaSpecs[Master].replicas"}},
			wantWarnings: []string{metricsIgnored},
		},
		"update: managedBy is immutable": {
			old: pytorchJob(),
			job: pytorchJob(func(j *kubeflowv1.PyTorchJob) { j.Spec.RunPolicy.ManagedBy = ptr.To(kubeflowv1.MultiKueueController) }),
			wantCauses: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueInvalid,
				Message: `Invalid value: "kueue.x-k8s.io/multikueue": field is immutable`, Field: "spec.runPolicy.managedBy"}},
		},
		"update: a spec change is held to the rules": {
			old:        pytorchJob(),
			job:        pytorchJob(func(j *kubeflowv1.PyTorchJob) { j.Spec.PyTorchReplicaSpecs["Master"].Replicas = ptr.To[int32](2) }),
			wantCauses: []metav1.StatusCause{{Type: metav1.CauseTypeForbidden, Message: "Forbidden: must be 1", Field: "spec.pytorchReplicaSpecs[Master].replicas"}},
		},
		"update: a job stored invalid (webhooks off) may still change its metadata": {
			old: pytorchJob(func(j *kubeflowv1.PyTorchJob) { j.Spec.PyTorchReplicaSpecs["Master"].Replicas = ptr.To[int32](2) }),
			job: pytorchJob(func(j *kubeflowv1.PyTorchJob) {
				j.Spec.PyTorchReplicaSpecs["Master"].Replicas = ptr.To[int32](2)
				j.Labels = map[string]string{"team": "a"}
			}),
		},
		"update: warnings on every update, as v1's webhook gives them": {
			old: pytorchJob(func(j *kubeflowv1.PyTorchJob) {
				j.Spec.ElasticPolicy = &kubeflowv1.ElasticPolicy{NProcPerNode: ptr.To[int32](2)}
			}),
			job: pytorchJob(func(j *kubeflowv1.PyTorchJob) {
				j.Spec.ElasticPolicy = &kubeflowv1.ElasticPolicy{NProcPerNode: ptr.To[int32](2)}
				j.Labels = map[string]string{"team": "a"}
			}),
			wantWarnings: []string{"spec.elasticPolicy.nProcPerNode is deprecated, use spec.nprocPerNode instead"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var warnings []string
			var err error
			if tc.old == nil {
				warnings, err = Validator{}.ValidateCreate(context.Background(), tc.job)
			} else {
				warnings, err = Validator{}.ValidateUpdate(context.Background(), tc.old, tc.job)
			}
			if diff := cmp.Diff(tc.wantCauses, causes(t, err)); diff != "" {
				t.Errorf("causes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantWarnings, warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

// The rejection is the API's Invalid status for the PyTorchJob, so that
// kubectl prints `PyTorchJob.kubeflow.org "mnist" is invalid: <field>: ...`.
func TestValidatorStatus(t *testing.T) {
	_, err := Validator{}.ValidateCreate(context.Background(),
		pytorchJob(func(j *kubeflowv1.PyTorchJob) { j.Spec.PyTorchReplicaSpecs["Master"].Replicas = ptr.To[int32](2) }))
	want := `PyTorchJob.kubeflow.org "mnist" is invalid: spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1`
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
}
