package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
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

// Statuses `wait --for` accepts: the SDK's TrainJob statuses (Created, Running,
// Complete, Failed) and the phases Pending and Suspended.
var Statuses = []string{trainer.TrainJobCreated, string(trainer.TrainJobPending), string(trainer.TrainJobRunning),
	string(trainer.TrainJobSuspended), trainer.TrainJobComplete, trainer.TrainJobFailed}

// ParseStatuses parses a comma-separated set of Statuses (case-insensitive).
func ParseStatuses(s string) (map[string]bool, error) {
	set := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		known := ""
		for _, st := range Statuses {
			if strings.EqualFold(f, st) {
				known = st
			}
		}
		if known == "" {
			return nil, fmt.Errorf("--for %q: unknown status %q; want some of %s", s, f, strings.Join(Statuses, ", "))
		}
		set[known] = true
	}
	if len(set) == 0 {
		return nil, fmt.Errorf("--for %q: no status; want some of %s", s, strings.Join(Statuses, ", "))
	}
	return set, nil
}

// reached reports whether the TrainJob is in one of the wanted statuses, and
// whether it can no longer get there (it finished in another status).
func reached(job *trainer.TrainJob, want map[string]bool) (ok, never bool) {
	if cond, done := Finished(job); done {
		return want[cond.Type], !want[cond.Type]
	}
	if want[trainer.TrainJobCreated] {
		return true, false
	}
	return job.Status.Phase != "" && want[string(job.Status.Phase)], false
}

// setString lists the wanted statuses in the order of Statuses.
func setString(want map[string]bool) string {
	var l []string
	for _, st := range Statuses {
		if want[st] {
			l = append(l, st)
		}
	}
	return strings.Join(l, " or ")
}

// Wait polls the TrainJob until it is in one of the wanted statuses (nil; see
// ParseStatuses; nil or empty means Complete), Failed when Failed is not wanted
// (a *JobFailedError), finished otherwise (an error), or timeout passes
// (ErrTimeout), writing a line to out whenever its phase, reason or number of
// ready nodes changes.
func Wait(ctx context.Context, c client.Client, namespace, name string, want map[string]bool, timeout, interval time.Duration, out io.Writer) error {
	if len(want) == 0 {
		want = map[string]bool{trainer.TrainJobComplete: true}
	}
	start := time.Now()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	var last progress
	pp := newProgressPrinter(out, true)
	defer pp.end()
	for first := true; ; first = false {
		var job trainer.TrainJob
		err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &job)
		switch {
		case apierrors.IsNotFound(err):
			return fmt.Errorf("TrainJob %s/%s: %w", namespace, name, err)
		case err != nil:
			// Transient (API server restart, network): say so and keep trying.
			pp.line("reading TrainJob %s: %v\n", name, err)
		default:
			if p := progressOf(&job); first || p != last {
				pp.line("%s TrainJob %s: %s\n", elapsed(start), name, p)
				last = p
			}
			pp.update(elapsed(start)+" ", job.Status.TrainerStatus)
			ok, never := reached(&job, want)
			if ok {
				return nil
			}
			if never {
				cond, _ := Finished(&job)
				if cond.Type == trainer.TrainJobFailed {
					return &JobFailedError{Name: name, Reason: cond.Reason, Message: cond.Message}
				}
				return fmt.Errorf("TrainJob %s is %s; it will not be %s", name, cond.Type, setString(want))
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for TrainJob %s: %w", name, ctx.Err())
		case <-deadline.C:
			if len(want) == 1 && want[trainer.TrainJobComplete] {
				return fmt.Errorf("TrainJob %s not finished after %s (last: %s): %w", name, timeout, last, ErrTimeout)
			}
			return fmt.Errorf("TrainJob %s not %s after %s (last: %s): %w", name, setString(want), timeout, last, ErrTimeout)
		case <-time.After(interval):
		}
	}
}

func elapsed(start time.Time) string {
	return fmt.Sprintf("[%5.1fs]", time.Since(start).Seconds())
}
