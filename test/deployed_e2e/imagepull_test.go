package deployed_e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/test/e2eutil"
)

// TestImageMissingFromNode: a trainer image that no node has, on a runtime
// that never pulls (examples/local-images/torch-runtime.yaml), leaves the pod
// waiting with the kubelet's ErrImageNeverPull, and the TrainJob's status
// says so with the pod's own reason and message; once the image is imported
// the pod starts, the job completes and the reason is gone.
func TestImageMissingFromNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	const image = "trainyard.local/e2e-exit0:1" // buildImage's name, before it is built
	key := createLocalTrainJob(t, ctx, "torch-runtime.yaml", "torch-distributed-local", "late-image",
		&trainer.Trainer{NumNodes: ptr.To[int32](1), Image: ptr.To(image), Command: []string{"/exit0"}})
	var got trainer.TrainJob
	e2eutil.WaitFor(t, 3*time.Minute, func() error {
		if err := c.Client().Get(ctx, key, &got); err != nil {
			return err
		}
		if got.Status.Reason != "ErrImageNeverPull" || !strings.Contains(got.Status.Message, image) {
			return &statusError{got.Status}
		}
		return nil
	})
	t.Logf("pending: phase %s, reason %s, message %q", got.Status.Phase, got.Status.Reason, got.Status.Message)
	if got.Status.Phase != trainer.TrainJobPending {
		t.Errorf("phase %s, want Pending", got.Status.Phase)
	}

	if built := buildImage(t, ctx, "exit0"); built != image {
		t.Fatalf("built %s, want %s", built, image)
	}
	cond := waitFinished(t, ctx, key)
	if cond.Type != trainer.TrainJobComplete {
		t.Fatalf("TrainJob %s: %s/%s: %s", key, cond.Type, cond.Reason, cond.Message)
	}
	if err := c.Client().Get(ctx, key, &got); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(got.Status.Reason+got.Status.Message, "ErrImageNeverPull") {
		t.Errorf("the resolved image problem is still in the status: %s: %s", got.Status.Reason, got.Status.Message)
	}
	for _, cond := range got.Status.Conditions {
		if strings.Contains(cond.Reason+cond.Message, "ErrImageNeverPull") {
			t.Errorf("condition %s still reports the resolved image problem: %s: %s", cond.Type, cond.Reason, cond.Message)
		}
	}
}

type statusError struct{ s trainer.TrainJobStatus }

func (e *statusError) Error() string {
	return "status " + string(e.s.Phase) + " " + e.s.Reason + ": " + e.s.Message
}
