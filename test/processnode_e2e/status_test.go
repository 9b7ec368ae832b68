package processnode_e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// TestTrainerStatusReport runs the upstream shape of a progress report
// (testdata/status_update.py: the three KUBEFLOW_TRAINER_SERVER_* variables,
// one POST) as a TrainJob's command on the process node: the pod gets its
// projected token (TokenRequest bound to the pod) and the CA from the
// namespace's trainyard-status-server-ca (statusserver.CAPublisher), reaches
// the manager's status server on the bridge, and the
// TrainJob's status.trainerStatus then holds exactly what it sent; the job
// completes.
func TestTrainerStatusReport(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const ns, name = "status-e2e", "report"
	createNamespace(t, ctx, ns)
	script, err := os.ReadFile(filepath.Join(repo, "test", "processnode_e2e", "testdata", "status_update.py"))
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "status-script", Namespace: ns}, Data: map[string]string{"status_update.py": string(script)}}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	job := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"},
			Trainer: &trainer.Trainer{
				NumNodes: ptr.To[int32](1),
				Command:  []string{"python3", "/opt/status/status_update.py"},
			},
			PodTemplateOverrides: []trainer.PodTemplateOverride{{
				TargetJobs: []trainer.PodTemplateOverrideTargetJob{{Name: "node"}},
				Spec: &trainer.PodTemplateSpecOverride{
					Volumes: []corev1.Volume{{Name: "status", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
						LocalObjectReference: corev1.LocalObjectReference{Name: "status-script"}}}}},
					Containers: []trainer.ContainerOverride{{Name: "node", VolumeMounts: []corev1.VolumeMount{{Name: "status", MountPath: "/opt/status", ReadOnly: true}}}},
				},
			}},
		},
	}
	if err := c.Client().Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	cond := waitFinished(t, ctx, ns, name)
	logs := podLogs(t, ctx, ns, name)
	if cond.Type != "Complete" {
		t.Fatalf("TrainJob %s: %s/%s: %s\nlogs: %v", name, cond.Type, cond.Reason, cond.Message, logs)
	}
	sent := regexp.MustCompile(`STATUS_SENT (\S+)`).FindStringSubmatch(logs["0"])
	if sent == nil {
		t.Fatalf("the script did not report; node 0 logged:\n%s", logs["0"])
	}
	at, err := time.Parse(time.RFC3339, sent[1])
	if err != nil {
		t.Fatal(err)
	}
	want := &trainer.TrainerStatus{
		ProgressPercentage: ptr.To[int32](42), EstimatedRemainingSeconds: ptr.To[int32](120),
		Metrics:         []trainer.Metric{{Name: "loss", Value: "0.123"}, {Name: "accuracy", Value: "0.95"}},
		LastUpdatedTime: metav1.NewTime(at),
	}
	var got trainer.TrainJob
	if err := c.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got.Status.TrainerStatus, cmp.Comparer(func(a, b metav1.Time) bool { return a.Equal(&b) })); diff != "" {
		t.Errorf("status.trainerStatus (-want +got):\n%s", diff)
	}
}
