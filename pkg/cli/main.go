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
	"sort"
	"strings"

	"github.com/spf13/pflag"
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

// env is what a command runs with.
type env struct {
	kube   KubeFlags
	stdout io.Writer
	stderr io.Writer
	// connect is KubeFlags.Connect; tests replace it.
	connect func() (*Clients, error)
}

// command is a subcommand: its flags and what it does with its arguments.
type command struct {
	usage   string // after "trainyard <name> "
	summary string
	help    string
	flags   func(fs *pflag.FlagSet)
	run     func(ctx context.Context, e *env, fs *pflag.FlagSet, args []string) error
}

func commands() map[string]*command {
	return map[string]*command{
		"runtimes": runtimesCommand(),
		"train":    trainCommand(),
		"get":      getCommand(),
		"logs":     logsCommand(),
		"wait":     waitCommand(),
		"delete":   deleteCommand(),
		"events":   eventsCommand(),
		"version":  versionCommand(),
	}
}

// Main runs the command line args (without the program name) and returns the
// exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	e := &env{stdout: stdout, stderr: stderr}
	e.connect = e.kube.Connect
	return run(ctx, e, args)
}

func run(ctx context.Context, e *env, args []string) int {
	cmds := commands()
	global := pflag.NewFlagSet("trainyard", pflag.ContinueOnError)
	global.SetInterspersed(false)
	global.SetOutput(io.Discard)
	e.kube.AddTo(global)
	if err := global.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			printUsage(e.stdout, cmds, global)
			return ExitOK
		}
		fmt.Fprintf(e.stderr, "error: %v\n\n", err)
		printUsage(e.stderr, cmds, global)
		return ExitUsage
	}
	rest := global.Args()
	if len(rest) == 0 || rest[0] == "help" {
		if len(rest) > 1 {
			if c, ok := cmds[rest[1]]; ok {
				printCommandUsage(e.stdout, rest[1], c, commandFlags(rest[1], c, global))
				return ExitOK
			}
		}
		w := e.stdout
		if len(rest) == 0 {
			w = e.stderr
		}
		printUsage(w, cmds, global)
		if len(rest) == 0 {
			return ExitUsage
		}
		return ExitOK
	}
	name := rest[0]
	c, ok := cmds[name]
	if !ok {
		fmt.Fprintf(e.stderr, "error: unknown command %q\n\n", name)
		printUsage(e.stderr, cmds, global)
		return ExitUsage
	}
	fs := commandFlags(name, c, global)
	if err := fs.Parse(rest[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			printCommandUsage(e.stdout, name, c, fs)
			return ExitOK
		}
		fmt.Fprintf(e.stderr, "error: %v\n\n", err)
		printCommandUsage(e.stderr, name, c, fs)
		return ExitUsage
	}
	err := c.run(ctx, e, fs, fs.Args())
	var ue usageError
	var failed *JobFailedError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ue):
		fmt.Fprintf(e.stderr, "error: %v\n\n", err)
		printCommandUsage(e.stderr, name, c, fs)
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

// commandFlags are the command's flags and the global ones, which may be given
// anywhere on the line, as with kubectl.
func commandFlags(name string, c *command, global *pflag.FlagSet) *pflag.FlagSet {
	fs := pflag.NewFlagSet("trainyard "+name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if c.flags != nil {
		c.flags(fs)
	}
	fs.AddFlagSet(global)
	return fs
}

func printUsage(w io.Writer, cmds map[string]*command, global *pflag.FlagSet) {
	var b strings.Builder
	b.WriteString("trainyard runs distributed training on Kubernetes: TrainJobs on (Cluster)TrainingRuntimes.\n\n")
	b.WriteString("Usage:\n  trainyard [global flags] <command> [flags] [args]\n\nCommands:\n")
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "  %-9s %s\n", n, cmds[n].summary)
	}
	b.WriteString("\nGlobal flags (anywhere on the line):\n")
	b.WriteString(global.FlagUsages())
	b.WriteString("\n`trainyard help <command>` or `trainyard <command> -h` describes a command.\n")
	_, _ = io.WriteString(w, b.String())
}

func printCommandUsage(w io.Writer, name string, c *command, fs *pflag.FlagSet) {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\nUsage:\n  trainyard %s %s\n", c.summary, name, c.usage)
	if c.help != "" {
		fmt.Fprintf(&b, "\n%s\n", strings.TrimSpace(c.help))
	}
	own := pflag.NewFlagSet(name, pflag.ContinueOnError)
	global := pflag.NewFlagSet("global", pflag.ContinueOnError)
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Name == "kubeconfig" || f.Name == "context" || f.Name == "namespace" {
			global.AddFlag(f)
		} else {
			own.AddFlag(f)
		}
	})
	if own.HasFlags() {
		fmt.Fprintf(&b, "\nFlags:\n%s", own.FlagUsages())
	}
	fmt.Fprintf(&b, "\nGlobal flags:\n%s", global.FlagUsages())
	_, _ = io.WriteString(w, b.String())
}
