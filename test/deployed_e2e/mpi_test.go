package deployed_e2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/test/e2eutil"
)

// TestMPIOverSSH: a 2-node TrainJob on examples/local-images/mpi-runtime.yaml
// (the mpi image, user 1000 with fsGroup 1000): the launcher's mpirun reaches
// each node pod's sshd over the pod network, with the key pair Trainyard
// made, and mpi4py allreduces across the ranks.
func TestMPIOverSSH(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := c.ApplyFile(ctx, filepath.Join(repo, "examples", "local-images", "mpi-runtime.yaml")); err != nil {
		t.Fatal(err)
	}
	ns := e2eutil.NewNamespace(t, c.Client(), "mpi-", time.Minute)
	job := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: "allreduce", Namespace: ns},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: "mpi-distributed-local"},
			Trainer: &trainer.Trainer{
				NumNodes: ptr.To[int32](2),
				Command:  []string{"mpirun", "python3", "-c", e2eutil.MPIAllreduce},
			},
		},
	}
	if err := c.Client().Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	cond := waitFinished(t, ctx, client.ObjectKeyFromObject(job))
	logs, err := kubectl(ctx, "logs", "-n", ns, "-l", "jobset.sigs.k8s.io/replicatedjob-name=launcher", "--tail=-1")
	if err != nil {
		t.Fatalf("%v: %s", err, logs)
	}
	t.Logf("launcher:\n%s", logs)
	if cond.Type != trainer.TrainJobComplete {
		t.Fatalf("TrainJob %s: %s/%s: %s", job.Name, cond.Type, cond.Reason, cond.Message)
	}
	results, err := e2eutil.MPIResults(logs)
	if err != nil {
		t.Fatal(err)
	}
	for rank := 0; rank < 2; rank++ {
		if r, ok := results[rank]; !ok || r.Size != 2 || r.Sum != 3 || r.UID != 1000 {
			t.Errorf("rank %d: %+v (printed: %t), want size 2, sum 3, uid 1000", rank, r, ok)
		}
	}
}

// waitFinished waits until the TrainJob is Complete or Failed and returns that condition.
func waitFinished(t *testing.T, ctx context.Context, key client.ObjectKey) metav1.Condition {
	t.Helper()
	return e2eutil.WaitFinished(ctx, t, c.Client(), key)
}
