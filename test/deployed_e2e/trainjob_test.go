package deployed_e2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/test/e2eutil"
)

// createLocalTrainJob applies the runtime of examples/local-images/<file>
// (named runtime) and creates the TrainJob name with tr on it, in a new
// namespace named after the job.
func createLocalTrainJob(t *testing.T, ctx context.Context, file, runtime, name string, tr *trainer.Trainer) client.ObjectKey {
	t.Helper()
	if err := c.ApplyFile(ctx, filepath.Join(repo, "examples", "local-images", file)); err != nil {
		t.Fatal(err)
	}
	ns := e2eutil.NewNamespace(t, c.Client(), name+"-", time.Minute)
	job := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: runtime}, Trainer: tr},
	}
	if err := c.Client().Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	return client.ObjectKeyFromObject(job)
}

// waitFinished waits until the TrainJob is Complete or Failed and returns that condition.
func waitFinished(t *testing.T, ctx context.Context, key client.ObjectKey) metav1.Condition {
	t.Helper()
	return e2eutil.WaitFinished(ctx, t, c.Client(), key)
}
