package webhooks

import (
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
)

// pytorchJob is the Kubeflow mnist example as users write it: a Master with
// replicas 1 and Workers, no restartPolicy, no runPolicy.
func pytorchJob(ns, name string, mutate func(*kubeflowv1.PyTorchJob)) *kubeflowv1.PyTorchJob {
	replica := func(n int32) *kubeflowv1.ReplicaSpec {
		return &kubeflowv1.ReplicaSpec{Replicas: ptr.To(n), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "pytorch", Image: "kubeflow/pytorch-dist-mnist:latest", Args: []string{"--backend", "gloo"}}},
		}}}
	}
	j := &kubeflowv1.PyTorchJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: kubeflowv1.PyTorchJobSpec{PyTorchReplicaSpecs: map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{
			kubeflowv1.PyTorchJobReplicaTypeMaster: replica(1),
			kubeflowv1.PyTorchJobReplicaTypeWorker: replica(2),
		}},
	}
	if mutate != nil {
		mutate(j)
	}
	return j
}

// Bad PyTorchJobs are rejected at admission with the API's Invalid status and
// the field errors the controller would put in their status (kubectl apply
// prints them), as training-operator v1.9's webhook rejects them.
func TestBadPyTorchJobsAreRejected(t *testing.T) {
	ns := newNamespace(t)
	cases := []struct {
		name          string
		job           *kubeflowv1.PyTorchJob
		field, detail string
	}{
		{"Master with replicas 2", pytorchJob(ns, "a", func(j *kubeflowv1.PyTorchJob) { j.Spec.PyTorchReplicaSpecs["Master"].Replicas = ptr.To[int32](2) }),
			"spec.pytorchReplicaSpecs[Master].replicas", "Forbidden: must be 1"},
		{"Master without replicas", pytorchJob(ns, "a", func(j *kubeflowv1.PyTorchJob) { j.Spec.PyTorchReplicaSpecs["Master"].Replicas = nil }),
			"spec.pytorchReplicaSpecs[Master].replicas", "Forbidden: must be 1"},
		{"Worker without a pytorch container", pytorchJob(ns, "a", func(j *kubeflowv1.PyTorchJob) {
			j.Spec.PyTorchReplicaSpecs["Worker"].Template.Spec.Containers[0].Name = "main"
		}), "spec.pytorchReplicaSpecs[Worker].template.spec.containers", "must have at least one container with name pytorch"},
		{"container without an image", pytorchJob(ns, "a", func(j *kubeflowv1.PyTorchJob) {
			j.Spec.PyTorchReplicaSpecs["Worker"].Template.Spec.Containers[0].Image = ""
		}), "spec.pytorchReplicaSpecs[Worker].template.spec.containers[0].image", "Required value"},
		{"unknown replica type", pytorchJob(ns, "a", func(j *kubeflowv1.PyTorchJob) {
			j.Spec.PyTorchReplicaSpecs["Chief"] = j.Spec.PyTorchReplicaSpecs["Worker"]
		}), "spec.pytorchReplicaSpecs[Chief]", `Unsupported value: "Chief"`},
		{"name that is no DNS-1035 label", pytorchJob(ns, "7up", nil), "metadata.name", "a DNS-1035 label must consist of"},
		{"elasticPolicy without Workers", pytorchJob(ns, "a", func(j *kubeflowv1.PyTorchJob) {
			delete(j.Spec.PyTorchReplicaSpecs, "Worker")
			j.Spec.ElasticPolicy = &kubeflowv1.ElasticPolicy{}
		}), "spec.pytorchReplicaSpecs[Worker]", "must be configured if elastic policy is used"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			requireFieldError(t, env.Client.Create(ctx(), tc.job), tc.field, tc.detail)
		})
	}

	// An update is held to the same rules.
	require.NoError(t, env.Client.Create(ctx(), pytorchJob(ns, "valid", nil)))
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var j kubeflowv1.PyTorchJob
		require.NoError(t, env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "valid"}, &j))
		j.Spec.PyTorchReplicaSpecs["Master"].Replicas = ptr.To[int32](2)
		return env.Client.Update(ctx(), &j)
	})
	requireFieldError(t, err, "spec.pytorchReplicaSpecs[Master].replicas", "Forbidden: must be 1")
}

// A valid PyTorchJob is stored with v1's defaults, which the controller
// otherwise applies only in memory.
func TestPyTorchJobIsDefaulted(t *testing.T) {
	ns := newNamespace(t)
	j := pytorchJob(ns, "mnist", func(j *kubeflowv1.PyTorchJob) {
		j.Spec.PyTorchReplicaSpecs["Worker"].Replicas = nil
		j.Spec.PyTorchReplicaSpecs["Worker"].RestartPolicy = kubeflowv1.RestartPolicyExitCode
	})
	require.NoError(t, env.Client.Create(ctx(), j))

	want := pytorchJob(ns, "mnist", func(j *kubeflowv1.PyTorchJob) {
		j.Spec.RunPolicy = kubeflowv1.RunPolicy{
			CleanPodPolicy: ptr.To(kubeflowv1.CleanPodPolicyNone),
			Suspend:        ptr.To(false), // the CRD's default
		}
		j.Spec.NprocPerNode = ptr.To("auto")
		j.Spec.PyTorchReplicaSpecs["Master"].RestartPolicy = kubeflowv1.RestartPolicyOnFailure
		j.Spec.PyTorchReplicaSpecs["Worker"].Replicas = ptr.To[int32](1)
		j.Spec.PyTorchReplicaSpecs["Worker"].RestartPolicy = kubeflowv1.RestartPolicyExitCode
		for _, rs := range j.Spec.PyTorchReplicaSpecs {
			rs.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "pytorchjob-port", ContainerPort: 23456, Protocol: corev1.ProtocolTCP}}
		}
	})
	var stored kubeflowv1.PyTorchJob
	require.NoError(t, env.Client.Get(ctx(), client.ObjectKeyFromObject(j), &stored))
	if diff := cmp.Diff(want.Spec, stored.Spec); diff != "" {
		t.Errorf("stored spec (-want +got):\n%s", diff)
	}
}

// warnings records the warnings the API server returns.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeader(_ int, _, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

// warningClient is a client whose requests' admission warnings rec collects.
func warningClient(t *testing.T) (client.Client, *warnings) {
	rec := &warnings{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = rec
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	require.NoError(t, err)
	return c, rec
}

// Deprecated fields come back as admission warnings, which kubectl prints.
func TestPyTorchJobDeprecationWarnings(t *testing.T) {
	ns := newNamespace(t)
	c, rec := warningClient(t)

	require.NoError(t, c.Create(ctx(), pytorchJob(ns, "elastic", func(j *kubeflowv1.PyTorchJob) {
		delete(j.Spec.PyTorchReplicaSpecs, "Master")
		j.Spec.ElasticPolicy = &kubeflowv1.ElasticPolicy{MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](2), NProcPerNode: ptr.To[int32](2)}
	})))
	require.Equal(t, []string{"spec.elasticPolicy.nProcPerNode is deprecated, use spec.nprocPerNode instead"}, rec.msgs)

	rec.msgs = nil
	require.NoError(t, c.Create(ctx(), pytorchJob(ns, "plain", nil)))
	require.Empty(t, rec.msgs, "no warnings for a job without deprecated fields")
}

// spec.elasticPolicy.metrics is accepted, as v1 accepted it, but Trainyard
// creates no HorizontalPodAutoscaler: the webhook says so on create and on
// every update.
func TestPyTorchJobMetricsWarning(t *testing.T) {
	ns := newNamespace(t)
	c, rec := warningClient(t)
	const want = "spec.elasticPolicy.metrics is ignored: Trainyard creates no HorizontalPodAutoscaler, " +
		"so the workers are not scaled by these metrics and stay at spec.pytorchReplicaSpecs[Worker].replicas"

	j := pytorchJob(ns, "hpa", func(j *kubeflowv1.PyTorchJob) {
		delete(j.Spec.PyTorchReplicaSpecs, "Master")
		j.Spec.ElasticPolicy = &kubeflowv1.ElasticPolicy{MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](3),
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](80)}}}}}
	})
	require.NoError(t, c.Create(ctx(), j))
	require.Equal(t, []string{want}, rec.msgs, "create")

	var stored kubeflowv1.PyTorchJob
	require.NoError(t, c.Get(ctx(), client.ObjectKeyFromObject(j), &stored))
	require.Len(t, stored.Spec.ElasticPolicy.Metrics, 1, "the metrics are stored as written")

	rec.msgs = nil
	stored.Labels = map[string]string{"team": "a"}
	require.NoError(t, c.Update(ctx(), &stored))
	require.Equal(t, []string{want}, rec.msgs, "update")
}
