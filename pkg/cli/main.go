// Package cli is the `trainyard` command line: the Kubeflow SDK's TrainerClient
// flow (list or get runtimes, train, get a job with its steps, logs, wait, events,
// delete) against any cluster that serves trainer.kubeflow.org/v1alpha1, with
// kubectl's connection flags. The pure parts (device derivation, --resources, scripts, steps)
// are exported for tests and other tools; Main runs a command line.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/trainyard/trainyard/pkg/cli/view"
)

// Exit codes of Main.
const (
	ExitOK = 0
	// ExitFailed: an error, or `wait` saw the TrainJob fail.
	ExitFailed = 1
	// ExitUsage: a bad command line.
	ExitUsage = 2
	// ExitTimeout: `wait` gave up before the TrainJob finished.
	ExitTimeout = 3
	// ExitInterrupted: interrupted (Ctrl-C), as shells report SIGINT.
	ExitInterrupted = 130
)

// usageError is a mistake on the command line.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

func usagef(format string, args ...interface{}) error {
	return usageError{fmt.Errorf(format, args...)}
}

// errNoCommand: the command line names no command.
var errNoCommand = errors.New("no command")

// env is what a command runs with.
type env struct {
	// kube are the connection flags.
	kube *genericclioptions.ConfigFlags
	// name is the program as the usage lines call it: "trainyard", or
	// "kubectl trainyard" when run as a kubectl plugin (ProgramName).
	name   string
	stdout io.Writer
	stderr io.Writer
	// connect is Connect(kube); tests replace it.
	connect func() (*Clients, error)
	// kinds are the job kinds' CLI views (Kinds()), the default first.
	kinds kindTable
}

// namespaceFlag is -n's value, "" when it was not given.
func (e *env) namespaceFlag() string {
	if e.kube == nil || e.kube.Namespace == nil {
		return ""
	}
	return *e.kube.Namespace
}

// ProgramName is how the usage lines call the program run as argv0:
// "kubectl trainyard" for the kubectl plugin kubectl-trainyard and for its
// completion helper kubectl_complete-trainyard (kubectl's plugin naming:
// kubectl-a-b is `kubectl a b`, kubectl-a_b `kubectl a-b`), "trainyard"
// otherwise.
func ProgramName(argv0 string) string {
	base := strings.TrimSuffix(filepath.Base(argv0), ".exe")
	plugin, ok := strings.CutPrefix(base, kubectlCompletePrefix)
	if !ok {
		plugin, ok = strings.CutPrefix(base, "kubectl-")
	}
	if !ok || plugin == "" {
		return "trainyard"
	}
	return "kubectl " + strings.ReplaceAll(strings.ReplaceAll(plugin, "-", " "), "_", "-")
}

// kubectlCompletePrefix starts the name of the program that kubectl (1.26
// and later) runs to complete a plugin's command line: it is given the
// arguments of cobra's __complete.
const kubectlCompletePrefix = "kubectl_complete-"

// Main runs the command line args (without the program name) and returns the
// exit code. The usage lines call the program as ProgramName(os.Args[0]) does;
// run as kubectl_complete-trainyard, Main completes args for kubectl.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	e := &env{kube: NewKubeFlags(), name: ProgramName(os.Args[0]), stdout: stdout, stderr: stderr}
	e.connect = func() (*Clients, error) { return Connect(e.kube) }
	if strings.HasPrefix(filepath.Base(os.Args[0]), kubectlCompletePrefix) {
		args = append([]string{cobra.ShellCompRequestCmd}, args...)
	}
	return run(ctx, e, args)
}

// run runs the command line on the commands of newRootCommand and maps what
// they return to the exit code, printing the error.
func run(ctx context.Context, e *env, args []string) int {
	if e.kube == nil {
		e.kube = NewKubeFlags()
	}
	if e.name == "" {
		e.name = "trainyard"
	}
	if e.kinds == nil {
		e.kinds = Kinds()
	}
	root := newRootCommand(e)
	if args == nil {
		args = []string{} // cobra reads os.Args when given nil
	}
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	var ue usageError
	var failed *JobFailedError
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, errNoCommand):
		root.SetOut(e.stderr)
		_ = root.Help()
		return ExitUsage
	case errors.As(err, &ue) || view.IsUsage(err):
		fmt.Fprintf(e.stderr, "error: %v\n\n%s", err, cmd.UsageString())
		return ExitUsage
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		return ExitInterrupted
	case errors.Is(err, ErrTimeout):
		fmt.Fprintf(e.stderr, "error: %v\n", err)
		return ExitTimeout
	case errors.As(err, &failed):
		fmt.Fprintf(e.stderr, "%v\n", err)
		return ExitFailed
	}
	fmt.Fprintf(e.stderr, "error: %v\n", err)
	return ExitFailed
}
