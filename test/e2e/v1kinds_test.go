package e2e

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/localcluster"
)

// Kueue's built-in kubeflow.org/xgboostjob integration queues an XGBoostJob
// as one gang, with no extra setup: it waits suspended, is admitted as a
// whole (Master and Workers), and its pods land on the admitted flavor's nodes.
func TestKueueQueuesXGBoostJob(t *testing.T) {
	cl := v1Client(t)
	if err := c.ApplyFile(ctx(), repoFile("examples/kueue/queues.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := c.RestartKueue(ctx(), []string{"batch/job", "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob", "kubeflow.org/pytorchjob", "kubeflow.org/xgboostjob"}); err != nil {
		t.Fatal(err)
	}
	replica := func(n int32, annotations map[string]string) *kubeflowv1.ReplicaSpec {
		return &kubeflowv1.ReplicaSpec{Replicas: ptr.To(n), Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Annotations: annotations},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "xgboost", Image: "docker.io/kubeflow/xgboost-dist-iris:latest",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": resource.MustParse("1")},
					Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}}}}}
	}
	job := &kubeflowv1.XGBoostJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: queueNS, Name: "queued-xgb", Labels: map[string]string{"kueue.x-k8s.io/queue-name": "gpu-queue"}},
		Spec: kubeflowv1.XGBoostJobSpec{XGBReplicaSpecs: map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{
			// The Master ends last: its success completes the job.
			kubeflowv1.XGBoostJobReplicaTypeMaster: replica(1, runningFor(10*time.Second)),
			kubeflowv1.XGBoostJobReplicaTypeWorker: replica(2, nil),
		}},
	}
	if err := cl.Create(ctx(), job); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Delete(ctx(), job, client.PropagationPolicy("Background")) })
	waitFor(t, long, func() error {
		if err := cl.Get(ctx(), client.ObjectKeyFromObject(job), job); err != nil {
			return err
		}
		for _, c := range job.Status.Conditions {
			if c.Type == kubeflowv1.JobSucceeded && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("XGBoostJob %s: not Succeeded yet: %+v", job.Name, job.Status.Conditions)
	})
	ps := podsBy(t, queueNS, map[string]string{kubeflowv1.JobNameLabel: job.Name})
	if len(ps) != 3 {
		t.Fatalf("want 3 pods, got %d", len(ps))
	}
	for _, p := range ps {
		if p.Spec.NodeSelector[localcluster.PoolLabel] != "gpu" {
			t.Errorf("pod %s: nodeSelector %v, want Kueue's gpu flavor", p.Name, p.Spec.NodeSelector)
		}
	}
}
