package cli

// The commands that act on one job: wait, events, delete.

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func waitCommand(e *env) *cobra.Command {
	var (
		timeout, interval time.Duration
		forStatus         string
	)
	kind := kindFlag{kinds: e.kinds}
	long, example := e.kinds.help("wait")
	cmd := &cobra.Command{
		Use:   "wait [KIND/]NAME [--for STATUS,...] [--timeout 10m]",
		Short: "Wait for a job to reach a status (by default to finish), showing its progress",
		Long: `Wait for a job to reach a status (by default to finish), showing its progress.

` + long,
		Example:           example,
		ValidArgsFunction: e.completeJobs(false),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, fs := cmd.Context(), cmd.Flags()
			if len(args) != 1 {
				return usagef("wait takes one job name, got %q", args)
			}
			if timeout <= 0 || interval <= 0 {
				return usagef("--timeout and --interval must be positive")
			}
			refs, err := kind.jobRefs(args)
			if err != nil {
				return err
			}
			var want map[string]bool // the kind's default
			if fs.Changed("for") {
				if want, err = parseStatuses(forStatus, refs[0].Kind.Wait().Statuses); err != nil {
					return usageError{err}
				}
			}
			cl, err := e.connect()
			if err != nil {
				return err
			}
			return Wait(ctx, cl.Client, refs[0].Kind, cl.Namespace, refs[0].Name, want, timeout, interval, e.stdout)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&forStatus, "for", "", "statuses to wait for, comma-separated (default: the job finished well); "+e.kinds.statusHelp())
	fs.DurationVar(&timeout, "timeout", 10*time.Minute, "give up after this long")
	fs.DurationVar(&interval, "interval", time.Second, "how often to look at the job")
	kind.addTo(cmd)
	_ = cmd.RegisterFlagCompletionFunc("for", e.completeStatuses)
	return cmd
}

// statusHelp is "a TrainJob: Created, ..., Complete (default); a PyTorchJob: ...".
func (t kindTable) statusHelp() string {
	parts := make([]string, 0, len(t))
	for _, k := range t {
		w := k.Wait()
		parts = append(parts, fmt.Sprintf("a %s: %s (default %s)", k.Kind(), strings.Join(w.Statuses, ", "), w.Done))
	}
	return strings.Join(parts, "; ")
}

func eventsCommand(e *env) *cobra.Command {
	var output string
	kind := kindFlag{kinds: e.kinds}
	cmd := &cobra.Command{
		Use:   "events [KIND/]NAME [-o yaml|json]",
		Short: "Show the events of a job, of its JobSet and of its pods, oldest first",
		Long: `Show the events of a job, of its JobSet and of its pods, oldest first.

Reads the namespace's events (core/v1, as the manager and other controllers
write them, and events.k8s.io/v1, as the scheduler does) about the job, its JobSet (of the same
name) and its pods (labelled jobset.sigs.k8s.io/jobset-name=NAME), oldest first,
in the columns of ` + "`kubectl events`" + `. Events of pods that are gone are not shown.`,
		Example: `  # Why a TrainJob is Pending
  trainyard events my-job

  # As JSON, in another namespace
  trainyard events my-job -n team-a -o json`,
		ValidArgsFunction: e.completeJobs(false),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if len(args) != 1 {
				return usagef("events takes one job name, got %q", args)
			}
			refs, err := kind.jobRefs(args)
			if err != nil {
				return err
			}
			if err := checkOutput(output); err != nil {
				return err
			}
			cl, err := e.connect()
			if err != nil {
				return err
			}
			ref := refs[0]
			evs, err := ListEvents(ctx, cl.Client, ref.Kind.New(), ref.Kind.Kind(), cl.Namespace, ref.Name)
			if err != nil {
				return err
			}
			if output != OutputTable {
				if evs == nil {
					evs = []Event{}
				}
				return printData(e.stdout, output, evs)
			}
			if len(evs) == 0 {
				fmt.Fprintf(e.stderr, "no events of %s %s in namespace %s\n", ref.Kind.Kind(), ref.Name, cl.Namespace)
				return nil
			}
			return PrintEvents(e.stdout, evs, time.Now())
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: yaml or json (default: a table)")
	kind.addTo(cmd)
	registerOutputCompletion(cmd)
	return cmd
}

func deleteCommand(e *env) *cobra.Command {
	kind := kindFlag{kinds: e.kinds}
	_, example := e.kinds.help("delete")
	cmd := &cobra.Command{
		Use:   "delete [KIND/]NAME...",
		Short: "Delete jobs (their JobSets and pods go with them)",
		Long: `Delete jobs (their JobSets and pods go with them).

A bare NAME is a ` + e.kinds[0].Kind() + `, KIND/NAME a job of that kind (` + e.kinds.want() + `), or NAME
with --kind; one line may name several kinds. Stops at the first job that
cannot be deleted.`,
		Example:           example,
		ValidArgsFunction: e.completeJobs(true),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if len(args) == 0 {
				return usagef("delete takes one or more job names")
			}
			refs, err := kind.jobRefs(args)
			if err != nil {
				return err
			}
			cl, err := e.connect()
			if err != nil {
				return err
			}
			for _, ref := range refs {
				job := ref.Kind.New()
				job.SetNamespace(cl.Namespace)
				job.SetName(ref.Name)
				if err := cl.Client.Delete(ctx, job, client.PropagationPolicy("Background")); err != nil {
					return fmt.Errorf("deleting %s %s/%s: %w", ref.Kind.Kind(), cl.Namespace, ref.Name, err)
				}
				fmt.Fprintf(e.stdout, "%s deleted\n", strings.Replace(ref.String(), "/", " ", 1))
			}
			return nil
		},
	}
	kind.addTo(cmd)
	return cmd
}
