package pytorchjob

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
)

func TestValidate(t *testing.T) {
	cases := map[string]struct {
		old          *kubeflowv1.PyTorchJob
		job          *kubeflowv1.PyTorchJob
		wantErrs     []string
		wantWarnings []string
	}{
		"mnist is valid":                         {job: mnist(1)},
		"worker-only and elastic jobs are valid": {job: elastic(4)},
		"keys in another case are accepted": {job: mnist(1, func(j *kubeflowv1.PyTorchJob) {
			j.Spec.PyTorchReplicaSpecs = map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{"master": j.Spec.PyTorchReplicaSpecs["Master"], "worker": j.Spec.PyTorchReplicaSpecs["Worker"]}
		})},
		"name must be a DNS-1035 label": {
			job:      mnist(1, func(j *kubeflowv1.PyTorchJob) { j.Name = "1mnist" }),
			wantErrs: []string{`metadata.name: Invalid value: "1mnist": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')`},
		},
		"name too long for the pod host names": {
			job:      mnist(10, func(j *kubeflowv1.PyTorchJob) { j.Name = strings.Repeat("a", 51) }),
			wantErrs: []string{`metadata.name: Too long: may not be more than 50 bytes`},
		},
		"replica specs are required": {
			job:      mnist(1, func(j *kubeflowv1.PyTorchJob) { j.Spec.PyTorchReplicaSpecs = nil }),
			wantErrs: []string{"spec.pytorchReplicaSpecs: Required value: must be required"},
		},
		"unknown replica type, duplicate case": {
			job: mnist(1, func(j *kubeflowv1.PyTorchJob) {
				j.Spec.PyTorchReplicaSpecs["Chief"] = replica(1, "")
				j.Spec.PyTorchReplicaSpecs["worker"] = replica(1, "")
			}),
			wantErrs: []string{
				`spec.pytorchReplicaSpecs[Chief]: Unsupported value: "Chief": supported values: "Master", "Worker"`,
				`spec.pytorchReplicaSpecs[worker]: Duplicate value: "worker is the same replica type as Worker"`,
			},
		},
		"Master replicas must be set to exactly 1; workers at least 1": {
			job: mnist(0, func(j *kubeflowv1.PyTorchJob) { j.Spec.PyTorchReplicaSpecs["Master"].Replicas = nil }),
			wantErrs: []string{
				"spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1",
				"spec.pytorchReplicaSpecs[Worker].replicas: Forbidden: must be at least 1",
			},
		},
		"containers: present, with images, one named pytorch": {
			job: mnist(1, func(j *kubeflowv1.PyTorchJob) {
				j.Spec.PyTorchReplicaSpecs["Master"].Template.Spec.Containers = nil
				j.Spec.PyTorchReplicaSpecs["Worker"].Template.Spec.Containers = []corev1.Container{{Name: "trainer"}}
			}),
			wantErrs: []string{
				"spec.pytorchReplicaSpecs[Master].template.spec.containers: Required value: must be specified",
				"spec.pytorchReplicaSpecs[Worker].template.spec.containers[0].image: Required value: must be required",
				"spec.pytorchReplicaSpecs[Worker].template.spec.containers: Required value: must have at least one container with name pytorch",
			},
		},
		"restart policy": {
			job:      mnist(1, func(j *kubeflowv1.PyTorchJob) { j.Spec.PyTorchReplicaSpecs["Worker"].RestartPolicy = "Sometimes" }),
			wantErrs: []string{`spec.pytorchReplicaSpecs[Worker].restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never", "ExitCode"`},
		},
		"run policy values": {
			job: mnist(1, func(j *kubeflowv1.PyTorchJob) {
				j.Spec.RunPolicy = kubeflowv1.RunPolicy{
					CleanPodPolicy: ptr.To[kubeflowv1.CleanPodPolicy]("Some"), BackoffLimit: ptr.To[int32](-1),
					ActiveDeadlineSeconds: ptr.To[int64](0), TTLSecondsAfterFinished: ptr.To[int32](-1), ManagedBy: ptr.To("me"),
				}
			}),
			wantErrs: []string{
				`spec.runPolicy.managedBy: Unsupported value: "me": supported values: "kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue"`,
				`spec.runPolicy.cleanPodPolicy: Unsupported value: "Some": supported values: "All", "Running", "None"`,
				"spec.runPolicy.backoffLimit: Invalid value: -1: must be greater than or equal to 0",
				"spec.runPolicy.activeDeadlineSeconds: Invalid value: 0: must be a positive integer",
				"spec.runPolicy.ttlSecondsAfterFinished: Invalid value: -1: must be greater than or equal to 0",
			},
		},
		"managedBy is immutable": {
			old:      mnist(1),
			job:      mnist(1, func(j *kubeflowv1.PyTorchJob) { j.Spec.RunPolicy.ManagedBy = ptr.To(kubeflowv1.MultiKueueController) }),
			wantErrs: []string{`spec.runPolicy.managedBy: Invalid value: "kueue.x-k8s.io/multikueue": field is immutable`},
		},
		"elastic needs workers; bounds in order": {
			job: elastic(2, func(j *kubeflowv1.PyTorchJob) {
				j.Spec.PyTorchReplicaSpecs = map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{"Master": replica(1, "")}
				j.Spec.ElasticPolicy.MinReplicas, j.Spec.ElasticPolicy.MaxReplicas = ptr.To[int32](3), ptr.To[int32](2)
			}),
			wantErrs: []string{
				"spec.pytorchReplicaSpecs[Worker]: Required value: must be configured if elastic policy is used",
				"spec.elasticPolicy.maxReplicas: Invalid value: 2: must not be less than minReplicas",
			},
		},
		"elastic nProcPerNode is deprecated, and forbidden next to nprocPerNode": {
			job: elastic(2, func(j *kubeflowv1.PyTorchJob) {
				j.Spec.ElasticPolicy.NProcPerNode = ptr.To[int32](2)
				j.Spec.NprocPerNode = ptr.To("2")
			}),
			wantErrs:     []string{"spec.elasticPolicy.nProcPerNode: Forbidden: must not be used with spec.nprocPerNode"},
			wantWarnings: []string{"spec.elasticPolicy.nProcPerNode is deprecated, use spec.nprocPerNode instead"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			warnings, errs := Validate(tc.old, tc.job)
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			if diff := cmp.Diff(tc.wantErrs, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantWarnings, warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestIgnored(t *testing.T) {
	metrics := []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType,
		Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU}}}
	cases := map[string]struct {
		job  *kubeflowv1.PyTorchJob
		want []string
	}{
		"no elastic policy":             {job: mnist(1)},
		"an elastic policy, no metrics": {job: elastic(2)},
		"an empty list of metrics":      {job: elastic(2, func(j *kubeflowv1.PyTorchJob) { j.Spec.ElasticPolicy.Metrics = []autoscalingv2.MetricSpec{} })},
		"metrics: no HorizontalPodAutoscaler": {
			job:  elastic(2, func(j *kubeflowv1.PyTorchJob) { j.Spec.ElasticPolicy.Metrics = metrics }),
			want: []string{"spec.elasticPolicy.metrics is ignored: Trainyard creates no HorizontalPodAutoscaler, so the workers are not scaled by these metrics and stay at spec.pytorchReplicaSpecs[Worker].replicas"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Ignored(tc.job)); diff != "" {
				t.Errorf("Ignored (-want +got):\n%s", diff)
			}
			// Ignored fields are no errors.
			if _, errs := Validate(nil, tc.job); len(errs) > 0 {
				t.Errorf("Validate: %v", errs)
			}
		})
	}
}
