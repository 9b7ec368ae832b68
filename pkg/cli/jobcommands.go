package cli

// The commands that act on one job: wait, events, delete.

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

func waitCommand(e *env) *cobra.Command {
	var (
		timeout, interval time.Duration
		forStatus         string
		kind              kindFlag
	)
	cmd := &cobra.Command{
		Use:   "wait NAME [--for Complete] [--timeout 10m] | pytorchjob/NAME [--for Succeeded]",
		Short: "Wait for a TrainJob (or PyTorchJob) to reach a status (by default to finish), showing its progress",
		Long: `Wait for a TrainJob (or PyTorchJob) to reach a status (by default to finish), showing its progress.

Prints a line whenever the TrainJob's phase, reason or number of ready nodes
changes. By default waits for Complete: exits 0 when it is Complete, 1 when it
Failed (with the reason and message), 3 when the timeout passes first.

--for takes a comma-separated set of statuses, as the SDK's
wait_for_job_status(status={...}): Created (the TrainJob exists and has not
finished), Pending, Running, Suspended (status.phase), Complete, Failed. Exits 0
as soon as the TrainJob is in any of them; 1 when it Failed and Failed is not in
the set, or it finished in another status; 3 on timeout.

A PyTorchJob (pytorchjob/NAME, or NAME with --kind pytorchjob) is waited for by
its v1 conditions: by default Succeeded (exit 1 when it Failed); --for takes
Created, Running, Restarting, Suspended, Succeeded, Failed. A line is printed
whenever its status, reason or number of active replicas changes.`,
		Example: `  # Until the TrainJob has finished: exit 0 when Complete, 1 when Failed, 3 after 10 minutes
  trainyard wait my-job

  # Until it runs (or has finished), for at most 5 minutes
  trainyard wait my-job --for Running,Complete --timeout 5m

  # A PyTorchJob, until it has Succeeded
  trainyard wait pytorchjob/mnist`,
		ValidArgsFunction: e.completeJobs(false),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, fs := cmd.Context(), cmd.Flags()
			if len(args) != 1 {
				return usagef("wait takes one TrainJob name, got %q", args)
			}
			if timeout <= 0 || interval <= 0 {
				return usagef("--timeout and --interval must be positive")
			}
			refs, err := kind.jobRefs(args)
			if err != nil {
				return err
			}
			wait, statuses := Wait, Statuses
			if refs[0].IsPyTorchJob() {
				wait, statuses = WaitPyTorchJob, PyTorchJobStatuses
			}
			var want map[string]bool // the kind's default
			if fs.Changed("for") || !refs[0].IsPyTorchJob() {
				if want, err = parseStatuses(forStatus, statuses); err != nil {
					return usageError{err}
				}
			}
			cl, err := e.connect()
			if err != nil {
				return err
			}
			return wait(ctx, cl.Client, cl.Namespace, refs[0].Name, want, timeout, interval, e.stdout)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&forStatus, "for", trainer.TrainJobComplete, "statuses to wait for, comma-separated: Created, Pending, Running, Suspended, Complete, Failed (a PyTorchJob: Created, Running, Restarting, Suspended, Succeeded, Failed; default Succeeded)")
	fs.DurationVar(&timeout, "timeout", 10*time.Minute, "give up after this long")
	fs.DurationVar(&interval, "interval", time.Second, "how often to look at the TrainJob")
	kind.addTo(cmd)
	_ = cmd.RegisterFlagCompletionFunc("for", completeStatuses)
	return cmd
}

func eventsCommand(e *env) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "events NAME [-o yaml|json]",
		Short: "Show the events of a TrainJob, of its JobSet and of its pods, oldest first",
		Long: `Show the events of a TrainJob, of its JobSet and of its pods, oldest first.

Reads the namespace's events (core/v1, as the manager and other controllers
write them, and events.k8s.io/v1, as the scheduler does) about the TrainJob, its JobSet (of the same
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
				return usagef("events takes one TrainJob name, got %q", args)
			}
			ref, err := ParseJobRef(args[0], trainer.TrainJobKind, false)
			if err != nil {
				return err
			}
			if ref.IsPyTorchJob() {
				return usagef("events takes TrainJobs; for a PyTorchJob: kubectl events --for %s", ref)
			}
			name := ref.Name
			if err := checkOutput(output); err != nil {
				return err
			}
			cl, err := e.connect()
			if err != nil {
				return err
			}
			evs, err := ListEvents(ctx, cl.Client, cl.Namespace, name)
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
				fmt.Fprintf(e.stderr, "no events of TrainJob %s in namespace %s\n", name, cl.Namespace)
				return nil
			}
			return PrintEvents(e.stdout, evs, time.Now())
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: yaml or json (default: a table)")
	registerOutputCompletion(cmd)
	return cmd
}

func deleteCommand(e *env) *cobra.Command {
	var kind kindFlag
	cmd := &cobra.Command{
		Use:   "delete NAME... | pytorchjob/NAME...",
		Short: "Delete TrainJobs or PyTorchJobs (their JobSets and pods go with them)",
		Long: `Delete TrainJobs or PyTorchJobs (their JobSets and pods go with them).

A bare NAME is a TrainJob, pytorchjob/NAME a PyTorchJob (or NAME with --kind
pytorchjob); one line may name both kinds. Stops at the first job that cannot
be deleted.`,
		Example: `  # Two TrainJobs
  trainyard delete my-job other-job

  # A PyTorchJob
  trainyard delete pytorchjob/mnist`,
		ValidArgsFunction: e.completeJobs(true),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if len(args) == 0 {
				return usagef("delete takes one or more TrainJob names")
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
				var job client.Object = &trainer.TrainJob{}
				if ref.IsPyTorchJob() {
					job = &kubeflowv1.PyTorchJob{}
				}
				job.SetNamespace(cl.Namespace)
				job.SetName(ref.Name)
				if err := cl.Client.Delete(ctx, job, client.PropagationPolicy("Background")); err != nil {
					return fmt.Errorf("deleting %s %s/%s: %w", ref.Kind, cl.Namespace, ref.Name, err)
				}
				fmt.Fprintf(e.stdout, "%s deleted\n", strings.Replace(ref.String(), "/", " ", 1))
			}
			return nil
		},
	}
	kind.addTo(cmd)
	return cmd
}
