package deployed_e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/localcluster"
	"github.com/trainyard/trainyard/test/e2eutil"
)

// TestSeedPyTorchJob: the CPU PyTorchJob of seed 003's guide
// (testdata/seed003-pytorchjob.yaml: verbatim but for its image) with its
// volume "data" bound by the cluster's default StorageClass: the Master and
// both Workers succeed, and the Master's result is in the volume.
func TestSeedPyTorchJob(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	s := localcluster.Scheme()
	utilruntime.Must(kubeflowv1.AddToScheme(s))
	cl, err := client.New(c.RESTConfig(), client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	ns := e2eutil.NewNamespace(t, cl, "user-", time.Minute)
	var pvc corev1.PersistentVolumeClaim
	var job kubeflowv1.PyTorchJob
	for _, x := range []struct {
		file string
		obj  client.Object
	}{{"seed003-pvc.yaml", &pvc}, {"seed003-pytorchjob.yaml", &job}} {
		raw, err := os.ReadFile(filepath.Join(repo, "test", "deployed_e2e", "testdata", x.file))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.UnmarshalStrict(raw, x.obj); err != nil {
			t.Fatalf("%s: %v", x.file, err)
		}
		x.obj.SetNamespace(ns)
		if err := cl.Create(ctx, x.obj); err != nil {
			t.Fatalf("%s: %v", x.file, err)
		}
	}
	e2eutil.WaitFor(t, 5*time.Minute, func() error {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(&job), &job); err != nil {
			return err
		}
		for _, cond := range job.Status.Conditions {
			if cond.Type == kubeflowv1.JobFailed && cond.Status == corev1.ConditionTrue {
				t.Fatalf("PyTorchJob failed: %s: %s", cond.Reason, cond.Message)
			}
			if cond.Type == kubeflowv1.JobSucceeded && cond.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return &pytorchJobStatusError{job.Status}
	})
	for rt, want := range map[kubeflowv1.ReplicaType]int32{kubeflowv1.PyTorchJobReplicaTypeMaster: 1, kubeflowv1.PyTorchJobReplicaTypeWorker: 2} {
		if st := job.Status.ReplicaStatuses[rt]; st == nil || st.Succeeded != want {
			t.Errorf("replica status %s: %+v, want %d succeeded", rt, st, want)
		}
	}
	if err := cl.Get(ctx, client.ObjectKeyFromObject(&pvc), &pvc); err != nil {
		t.Fatal(err)
	}
	if pvc.Status.Phase != corev1.ClaimBound {
		t.Errorf("PVC data: %s, want Bound", pvc.Status.Phase)
	}
	// What the Master wrote, read back from the volume by another pod.
	phase, logs := runPodWithVolume(t, ctx, ns, "read-result", archiveImage(t, "torch"), "data",
		"cat", "/opt/pytorch/output/result.txt")
	if phase != corev1.PodSucceeded || !strings.Contains(logs, "SEED003_RESULT rank=0 world=3 sum=6") {
		t.Errorf("the volume holds %q (%s), want the Master's SEED003_RESULT of 3 ranks", logs, phase)
	}
}

type pytorchJobStatusError struct{ s kubeflowv1.JobStatus }

func (e *pytorchJobStatusError) Error() string {
	var b strings.Builder
	b.WriteString("PyTorchJob not Succeeded:")
	for _, c := range e.s.Conditions {
		b.WriteString(" " + string(c.Type) + "=" + string(c.Status) + " (" + c.Reason + ": " + c.Message + ")")
	}
	return b.String()
}
