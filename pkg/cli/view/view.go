// Package view is what the trainyard CLI knows of a job kind: how its jobs
// are named on a command line, what `get` shows of one job and of a
// namespace's jobs, whose logs `logs` streams and how they are named, what
// `wait` waits for, and what shell completion offers. Each kind's package
// implements Kind (its jobframework.Kind's View returns it) from its own
// types; pkg/cli runs the commands for every kind of the one list of kinds
// (pkg/controller.Kinds) through it, and branches on none. What several
// kinds' views share (steps from pods, devices, ages, progress) is here.
package view

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/cli/logs"
)

// Kind is a job kind as the CLI shows it.
type Kind interface {
	// Kind is the API kind, e.g. "PyTorchJob".
	Kind() string
	// Names are what a command line may call the kind, lower case: its
	// singular, plural and short names. The first is KIND in KIND/NAME.
	Names() []string
	// New returns an empty job object of the kind (for delete and events).
	New() client.Object
	// Get reads one job and what `get NAME` shows of it.
	Get(ctx context.Context, c client.Client, namespace, name string) (Shown, error)
	// List reads the namespace's jobs, oldest first, and what `get` shows
	// of them; runtime, when set, keeps only those on that runtime (a kind
	// whose jobs have no runtime says so, with a UsageError).
	List(ctx context.Context, c client.Client, namespace, runtime string) (Shown, error)
	// Logs says whose logs `logs NAME` streams with these options (a
	// UsageError for options the kind does not take).
	Logs(ctx context.Context, c client.Client, namespace, name string, o LogOptions) (*Logs, error)
	// Wait says what `wait` waits for.
	Wait() Wait
	// Complete lists the namespace's jobs for shell completion: name to
	// description.
	Complete(ctx context.Context, c client.Client, namespace string) map[string]string
	// Help is the kind's part of a command's help (get, logs, wait,
	// delete): a paragraph and examples, each "" when it has none.
	Help(command string) (long, example string)
}

// Shown is what `get` shows: Data is printed with -o yaml|json (the kind's
// own shape), Print writes the text. Count is the number of jobs of a list
// (none: get says so on stderr).
type Shown struct {
	Data  any
	Print func(w io.Writer, now time.Time) error
	Count int
}

// LogOptions are what `logs` was asked for: --step (a step `get` shows),
// and --node (a node's rank; NodeSet when given).
type LogOptions struct {
	Step    string
	Node    int
	NodeSet bool
}

// Logs is what `logs` streams for one job: the streamer (Client, Namespace
// and Out are the CLI's to set), when following may end, the progress to
// show while following, and what to say when nothing has logged yet.
type Logs struct {
	Streamer *logs.Streamer
	// Done reports whether the logs may end: the job (or the step read)
	// finished. A NotFound error means the job is gone: they end too.
	Done func(ctx context.Context) (bool, error)
	// Progress, when set, is the job's reported progress, shown on stderr
	// while the logs are followed.
	Progress func(ctx context.Context) *trainer.TrainerStatus
	// None says that nothing has started yet (printed on stderr when there
	// is no log to print).
	None string
}

// Wait is what `wait` knows of a kind.
type Wait struct {
	// Statuses are what --for takes, in the order messages list them.
	Statuses []string
	// Done is the status of a job that finished well (what wait waits for
	// without --for), Failed of one that failed.
	Done, Failed string
	// Look reads the job once.
	Look func(ctx context.Context, c client.Client, namespace, name string) (State, error)
}

// State is one look at a job.
type State struct {
	// Key is what a line reports; one is printed whenever it changes.
	Key any
	// Progress is the line.
	Progress string
	// TrainerStatus is the progress the training code reported (nil: none).
	TrainerStatus *trainer.TrainerStatus
	// In are the statuses the job is in while it runs.
	In map[string]bool
	// Finished is how the job ended (nil while it runs).
	Finished *Finish
}

// Finish is how a job ended: the status (condition) it ended in.
type Finish struct{ Status, Reason, Message string }

// UsageError is a mistake on the command line (the CLI exits 2).
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Usagef is a UsageError.
func Usagef(format string, args ...any) error {
	return UsageError{fmt.Errorf(format, args...)}
}

// IsUsage reports whether err is a UsageError.
func IsUsage(err error) bool {
	var u UsageError
	return errors.As(err, &u)
}

// Provider is a job kind with a CLI view (jobframework.Kind's optional part).
type Provider interface {
	View() Kind
}

// Pods lists the pods of a namespace that sel selects.
func Pods(ctx context.Context, c client.Client, namespace string, sel client.MatchingLabelsSelector) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(namespace), sel); err != nil {
		return nil, err
	}
	return pods.Items, nil
}
