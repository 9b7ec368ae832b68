package deployed_e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/test/e2eutil"
)

// allreduce: every rank contributes rank+1 and prints the sum, n(n+1)/2 only
// when all n ranks took part, with its user and host.
const allreduce = `from mpi4py import MPI
import os, socket
comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
total = comm.allreduce(rank + 1, op=MPI.SUM)
print(f"MPI_RESULT rank={rank} size={size} sum={total} uid={os.getuid()} host={socket.gethostname()}", flush=True)
`

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
				Command:  []string{"mpirun", "python3", "-c", allreduce},
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
	for rank := 0; rank < 2; rank++ {
		if want := fmt.Sprintf("MPI_RESULT rank=%d size=2 sum=3 uid=1000 host=", rank); !strings.Contains(logs, want) {
			t.Errorf("launcher log has no %q", want)
		}
	}
}

// waitFinished waits until the TrainJob is Complete or Failed and returns that condition.
func waitFinished(t *testing.T, ctx context.Context, key client.ObjectKey) metav1.Condition {
	t.Helper()
	var job trainer.TrainJob
	for {
		if err := c.Client().Get(ctx, key, &job); err != nil && ctx.Err() == nil {
			t.Logf("reading TrainJob %s: %v", key, err)
		}
		for _, typ := range []string{trainer.TrainJobComplete, trainer.TrainJobFailed} {
			if cond := apimeta.FindStatusCondition(job.Status.Conditions, typ); cond != nil && cond.Status == metav1.ConditionTrue {
				return *cond
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("TrainJob %s not finished: %v; status %+v", key, ctx.Err(), job.Status)
		case <-time.After(time.Second):
		}
	}
}
