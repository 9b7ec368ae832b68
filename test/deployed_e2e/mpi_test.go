package deployed_e2e

import (
	"context"
	"testing"
	"time"

	"k8s.io/utils/ptr"

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
	key := createLocalTrainJob(t, ctx, "mpi-runtime.yaml", "mpi-distributed-local", "allreduce",
		&trainer.Trainer{NumNodes: ptr.To[int32](2), Command: []string{"mpirun", "python3", "-c", e2eutil.MPIAllreduce}})
	cond := waitFinished(t, ctx, key)
	logs, err := kubectl(ctx, "logs", "-n", key.Namespace, "-l", "jobset.sigs.k8s.io/replicatedjob-name=launcher", "--tail=-1")
	if err != nil {
		t.Fatalf("%v: %s", err, logs)
	}
	t.Logf("launcher:\n%s", logs)
	if cond.Type != trainer.TrainJobComplete {
		t.Fatalf("TrainJob %s: %s/%s: %s", key, cond.Type, cond.Reason, cond.Message)
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
