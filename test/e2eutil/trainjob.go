package e2eutil

import (
	"context"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// Finished is the TrainJob's Complete or Failed condition, when one is true.
func Finished(job *trainer.TrainJob) (metav1.Condition, bool) {
	for _, typ := range []string{trainer.TrainJobComplete, trainer.TrainJobFailed} {
		if cond := apimeta.FindStatusCondition(job.Status.Conditions, typ); cond != nil && cond.Status == metav1.ConditionTrue {
			return *cond, true
		}
	}
	return metav1.Condition{}, false
}

// WaitFinished reads the TrainJob every 500 ms until it is Complete or Failed
// and returns that condition; it fails t when ctx ends first.
func WaitFinished(ctx context.Context, t testing.TB, cli client.Client, key client.ObjectKey) metav1.Condition {
	t.Helper()
	for {
		var job trainer.TrainJob
		if err := cli.Get(ctx, key, &job); err != nil && ctx.Err() == nil {
			t.Logf("reading TrainJob %s: %v", key, err)
		}
		if cond, ok := Finished(&job); ok {
			return cond
		}
		select {
		case <-ctx.Done():
			t.Fatalf("TrainJob %s not finished: %v; status %+v", key, ctx.Err(), job.Status)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
