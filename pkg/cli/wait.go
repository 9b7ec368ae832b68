package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// ErrTimeout is returned by Wait when the TrainJob did not finish in time.
var ErrTimeout = errors.New("timed out")

// JobFailedError is returned by Wait for a TrainJob (or WaitPyTorchJob for a
// PyTorchJob) that Failed.
type JobFailedError struct {
	// Kind is the job's kind; empty means TrainJob.
	Kind                  string
	Name, Reason, Message string
}

func (e *JobFailedError) Error() string {
	kind := e.Kind
	if kind == "" {
		kind = trainer.TrainJobKind
	}
	return fmt.Sprintf("%s %s Failed: %s: %s", kind, e.Name, e.Reason, e.Message)
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
	return s + reasonText(p.reason, p.message)
}

// reasonText is " (reason: message)", " (reason)" or "".
func reasonText(reason, message string) string {
	switch {
	case reason != "" && message != "":
		return " (" + reason + ": " + message + ")"
	case reason != "":
		return " (" + reason + ")"
	}
	return ""
}

// pyTorchJobProgress is what `wait` reports about a PyTorchJob: its status
// (PyTorchJobCondition) and how many of its replicas run.
type pyTorchJobProgress struct {
	status, reason, message string
	active, replicas        int32
}

func pyTorchJobProgressOf(job *kubeflowv1.PyTorchJob) pyTorchJobProgress {
	var p pyTorchJobProgress
	if c := PyTorchJobCondition(&job.Status); c != nil {
		p.status, p.reason, p.message = string(c.Type), c.Reason, c.Message
	}
	for t, rs := range job.Spec.PyTorchReplicaSpecs {
		if rs != nil {
			p.replicas += ptr.Deref(rs.Replicas, 1)
		}
		if st := job.Status.ReplicaStatuses[t]; st != nil {
			p.active += st.Active
		}
	}
	return p
}

func (p pyTorchJobProgress) String() string {
	if p.status == "" {
		return "no status yet"
	}
	s := p.status
	switch kubeflowv1.JobConditionType(p.status) {
	case kubeflowv1.JobCreated, kubeflowv1.JobRunning, kubeflowv1.JobRestarting:
		if p.replicas > 0 {
			s += fmt.Sprintf(", %d/%d replicas active", p.active, p.replicas)
		}
	}
	return s + reasonText(p.reason, p.message)
}

// Statuses `wait --for` accepts: the SDK's TrainJob statuses (Created, Running,
// Complete, Failed) and the phases Pending and Suspended.
var Statuses = []string{trainer.TrainJobCreated, string(trainer.TrainJobPending), string(trainer.TrainJobRunning),
	string(trainer.TrainJobSuspended), trainer.TrainJobComplete, trainer.TrainJobFailed}

// ParseStatuses parses a comma-separated set of Statuses (case-insensitive).
func ParseStatuses(s string) (map[string]bool, error) { return parseStatuses(s, Statuses) }

// parseStatuses parses a comma-separated set of the known statuses
// (case-insensitive).
func parseStatuses(s string, statuses []string) (map[string]bool, error) {
	set := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		known := ""
		for _, st := range statuses {
			if strings.EqualFold(f, st) {
				known = st
			}
		}
		if known == "" {
			return nil, fmt.Errorf("--for %q: unknown status %q; want some of %s", s, f, strings.Join(statuses, ", "))
		}
		set[known] = true
	}
	if len(set) == 0 {
		return nil, fmt.Errorf("--for %q: no status; want some of %s", s, strings.Join(statuses, ", "))
	}
	return set, nil
}

// waitKind is what `wait` knows of a kind of job.
type waitKind struct {
	kind     string
	statuses []string // what --for takes, in the order messages list them
	done     string   // the status of a job that finished well: the default
	failed   string   // the status of a job that failed
	look     func(ctx context.Context, c client.Client, namespace, name string) (jobState, error)
}

// jobState is one look at a job.
type jobState struct {
	key           any    // what a line reports; one is printed whenever it changes
	progress      string // the line
	trainerStatus *trainer.TrainerStatus
	in            map[string]bool // the statuses the job is in while it runs
	finished      *finish         // nil while it runs
}

// finish is how a job ended: the condition it ended with.
type finish struct{ status, reason, message string }

var trainJobWait = waitKind{
	kind:     trainer.TrainJobKind,
	statuses: Statuses,
	done:     trainer.TrainJobComplete,
	failed:   trainer.TrainJobFailed,
	look: func(ctx context.Context, c client.Client, namespace, name string) (jobState, error) {
		var job trainer.TrainJob
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &job); err != nil {
			return jobState{}, err
		}
		p := progressOf(&job)
		// Created: the SDK's meaning, the TrainJob exists (and has not finished).
		s := jobState{key: p, progress: p.String(), trainerStatus: job.Status.TrainerStatus, in: map[string]bool{trainer.TrainJobCreated: true}}
		if job.Status.Phase != "" {
			s.in[string(job.Status.Phase)] = true
		}
		if c, done := Finished(&job); done {
			s.finished = &finish{c.Type, c.Reason, c.Message}
		}
		return s, nil
	},
}

var pyTorchJobWait = waitKind{
	kind:     kubeflowv1.PyTorchJobKind,
	statuses: PyTorchJobStatuses,
	done:     string(kubeflowv1.JobSucceeded),
	failed:   string(kubeflowv1.JobFailed),
	look: func(ctx context.Context, c client.Client, namespace, name string) (jobState, error) {
		var job kubeflowv1.PyTorchJob
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &job); err != nil {
			return jobState{}, err
		}
		p := pyTorchJobProgressOf(&job)
		s := jobState{key: p, progress: p.String(), in: map[string]bool{}}
		for _, c := range job.Status.Conditions {
			if c.Status == corev1.ConditionTrue {
				s.in[string(c.Type)] = true
			}
		}
		if c, done := PyTorchJobFinished(&job.Status); done {
			s.finished = &finish{string(c.Type), c.Reason, c.Message}
		}
		return s, nil
	},
}

// reached reports whether the job is in one of the wanted statuses, and
// whether it can no longer get there (it finished in another status).
func reached(s jobState, want map[string]bool) (ok, never bool) {
	if s.finished != nil {
		return want[s.finished.status], !want[s.finished.status]
	}
	for st := range s.in {
		if want[st] {
			return true, false
		}
	}
	return false, false
}

// setString lists the wanted statuses in the order of statuses.
func setString(statuses []string, want map[string]bool) string {
	var l []string
	for _, st := range statuses {
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
	return waitFor(ctx, c, trainJobWait, namespace, name, want, timeout, interval, out)
}

// WaitPyTorchJob is Wait for a PyTorchJob: the statuses are PyTorchJobStatuses
// (nil or empty want means Succeeded), a line is written whenever its status,
// reason or number of active replicas changes.
func WaitPyTorchJob(ctx context.Context, c client.Client, namespace, name string, want map[string]bool, timeout, interval time.Duration, out io.Writer) error {
	return waitFor(ctx, c, pyTorchJobWait, namespace, name, want, timeout, interval, out)
}

func waitFor(ctx context.Context, c client.Client, k waitKind, namespace, name string, want map[string]bool, timeout, interval time.Duration, out io.Writer) error {
	if len(want) == 0 {
		want = map[string]bool{k.done: true}
	}
	start := time.Now()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	var last jobState
	pp := newProgressPrinter(out, true)
	defer pp.end()
	for first := true; ; first = false {
		s, err := k.look(ctx, c, namespace, name)
		switch {
		case apierrors.IsNotFound(err):
			return fmt.Errorf("%s %s/%s: %w", k.kind, namespace, name, err)
		case err != nil:
			// Transient (API server restart, network): say so and keep trying.
			pp.line("reading %s %s: %v\n", k.kind, name, err)
		default:
			if first || s.key != last.key {
				pp.line("%s %s %s: %s\n", elapsed(start), k.kind, name, s.progress)
				last = s
			}
			pp.update(elapsed(start)+" ", s.trainerStatus)
			ok, never := reached(s, want)
			if ok {
				return nil
			}
			if never {
				if s.finished.status == k.failed {
					return &JobFailedError{Kind: k.kind, Name: name, Reason: s.finished.reason, Message: s.finished.message}
				}
				return fmt.Errorf("%s %s is %s; it will not be %s", k.kind, name, s.finished.status, setString(k.statuses, want))
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s %s: %w", k.kind, name, ctx.Err())
		case <-deadline.C:
			if len(want) == 1 && want[k.done] {
				return fmt.Errorf("%s %s not finished after %s (last: %s): %w", k.kind, name, timeout, last.progress, ErrTimeout)
			}
			return fmt.Errorf("%s %s not %s after %s (last: %s): %w", k.kind, name, setString(k.statuses, want), timeout, last.progress, ErrTimeout)
		case <-time.After(interval):
		}
	}
}

func elapsed(start time.Time) string {
	return fmt.Sprintf("[%5.1fs]", time.Since(start).Seconds())
}
