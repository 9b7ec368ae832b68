package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// ErrTimeout is returned by Wait when the TrainJob did not finish in time.
var ErrTimeout = errors.New("timed out")

// JobFailedError is returned by Wait for a TrainJob that Failed.
type JobFailedError struct {
	Name, Reason, Message string
}

func (e *JobFailedError) Error() string {
	return fmt.Sprintf("TrainJob %s Failed: %s: %s", e.Name, e.Reason, e.Message)
}

// progress is what `wait` reports about a TrainJob; a line is printed whenever
// it changes (the controller writes the message only on changes of state).
type progress struct {
	phase, reason, message string
	ready, nodes           int32
}

func progressOf(job *trainer.TrainJob) progress {
	p := progress{phase: string(job.Status.Phase), reason: job.Status.Reason, message: job.Status.Message}
	if job.Status.ReadyNodes != nil {
		p.ready = *job.Status.ReadyNodes
	}
	if job.Status.NumNodes != nil {
		p.nodes = *job.Status.NumNodes
	}
	if p.phase == "" {
		p.phase = "Created" // not reconciled yet (or by a controller without phases)
	}
	return p
}

func (p progress) String() string {
	s := p.phase
	if p.nodes > 0 && (p.phase == string(trainer.TrainJobPending) || p.phase == string(trainer.TrainJobRunning)) {
		s += fmt.Sprintf(", %d/%d nodes ready", p.ready, p.nodes)
	}
	switch {
	case p.reason != "" && p.message != "":
		s += " (" + p.reason + ": " + p.message + ")"
	case p.reason != "":
		s += " (" + p.reason + ")"
	}
	return s
}

// Wait polls the TrainJob until it is Complete (nil), Failed (a
// *JobFailedError) or timeout passes (ErrTimeout), writing a line to out whenever
// its phase, reason or number of ready nodes changes.
func Wait(ctx context.Context, c client.Client, namespace, name string, timeout, interval time.Duration, out io.Writer) error {
	start := time.Now()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	var last progress
	for first := true; ; first = false {
		var job trainer.TrainJob
		err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &job)
		switch {
		case apierrors.IsNotFound(err):
			return fmt.Errorf("TrainJob %s/%s: %w", namespace, name, err)
		case err != nil:
			// Transient (API server restart, network): say so and keep trying.
			fmt.Fprintf(out, "reading TrainJob %s: %v\n", name, err)
		default:
			if p := progressOf(&job); first || p != last {
				fmt.Fprintf(out, "%s TrainJob %s: %s\n", elapsed(start), name, p)
				last = p
			}
			if cond, done := Finished(&job); done {
				if cond.Type == trainer.TrainJobFailed {
					return &JobFailedError{Name: name, Reason: cond.Reason, Message: cond.Message}
				}
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for TrainJob %s: %w", name, ctx.Err())
		case <-deadline.C:
			return fmt.Errorf("TrainJob %s not finished after %s (last: %s): %w", name, timeout, last, ErrTimeout)
		case <-time.After(interval):
		}
	}
}

func elapsed(start time.Time) string {
	return fmt.Sprintf("[%5.1fs]", time.Since(start).Seconds())
}
