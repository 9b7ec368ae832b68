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

	"github.com/trainyard/trainyard/pkg/cli/view"
)

// ErrTimeout is returned by Wait when the job did not finish in time.
var ErrTimeout = errors.New("timed out")

// JobFailedError is returned by Wait for a job that Failed.
type JobFailedError struct {
	Kind                  string
	Name, Reason, Message string
}

func (e *JobFailedError) Error() string {
	return fmt.Sprintf("%s %s Failed: %s: %s", e.Kind, e.Name, e.Reason, e.Message)
}

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

// reached reports whether the job is in one of the wanted statuses, and
// whether it can no longer get there (it finished in another status).
func reached(s view.State, want map[string]bool) (ok, never bool) {
	if s.Finished != nil {
		return want[s.Finished.Status], !want[s.Finished.Status]
	}
	for st := range s.In {
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

// Wait polls a job of kind k until it is in one of the wanted statuses (nil
// or empty means the kind's Done: Complete for a TrainJob), Failed when Failed
// is not wanted (a *JobFailedError), finished otherwise (an error), or
// timeout passes (ErrTimeout), writing a line to out whenever what the kind
// reports of it changes.
func Wait(ctx context.Context, c client.Client, k view.Kind, namespace, name string, want map[string]bool, timeout, interval time.Duration, out io.Writer) error {
	w := k.Wait()
	kind := k.Kind()
	if len(want) == 0 {
		want = map[string]bool{w.Done: true}
	}
	start := time.Now()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	var last view.State
	pp := view.NewProgressPrinter(out, true)
	defer pp.End()
	for first := true; ; first = false {
		s, err := w.Look(ctx, c, namespace, name)
		switch {
		case apierrors.IsNotFound(err):
			return fmt.Errorf("%s %s/%s: %w", kind, namespace, name, err)
		case err != nil:
			// Transient (API server restart, network): say so and keep trying.
			pp.Line("reading %s %s: %v\n", kind, name, err)
		default:
			if first || s.Key != last.Key {
				pp.Line("%s %s %s: %s\n", elapsed(start), kind, name, s.Progress)
				last = s
			}
			pp.Update(elapsed(start)+" ", s.TrainerStatus)
			ok, never := reached(s, want)
			if ok {
				return nil
			}
			if never {
				if s.Finished.Status == w.Failed {
					return &JobFailedError{Kind: kind, Name: name, Reason: s.Finished.Reason, Message: s.Finished.Message}
				}
				return fmt.Errorf("%s %s is %s; it will not be %s", kind, name, s.Finished.Status, setString(w.Statuses, want))
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s %s: %w", kind, name, ctx.Err())
		case <-deadline.C:
			if len(want) == 1 && want[w.Done] {
				return fmt.Errorf("%s %s not finished after %s (last: %s): %w", kind, name, timeout, last.Progress, ErrTimeout)
			}
			return fmt.Errorf("%s %s not %s after %s (last: %s): %w", kind, name, setString(w.Statuses, want), timeout, last.Progress, ErrTimeout)
		case <-time.After(interval):
		}
	}
}

func elapsed(start time.Time) string {
	return fmt.Sprintf("[%5.1fs]", time.Since(start).Seconds())
}
