package cli

// The commands that act on one job: wait, events, delete.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

func waitCommand() *command {
	var (
		timeout, interval time.Duration
		forStatus         string
		kind              kindFlag
	)
	return &command{
		usage:   "NAME [--for Complete] [--timeout 10m] | pytorchjob/NAME [--for Succeeded]",
		summary: "Wait for a TrainJob (or PyTorchJob) to reach a status (by default to finish), showing its progress",
		help: `Prints a line whenever the TrainJob's phase, reason or number of ready nodes
changes. By default waits for Complete: exits 0 when it is Complete, 1 when it
Failed (with the reason and message), 3 when the timeout passes first.

--for takes a comma-separated set of statuses, as the SDK's
wait_for_job_status(status={...}): Created (the TrainJob exists and has not
finished), Pending, Running, Suspended (status.phase), Complete, Failed. Exits 0
as soon as the TrainJob is in any of them; 1 when it Failed and Failed is not in
the set, or it finished in another status; 3 on timeout. Example:
  trainyard wait my-job --for Running,Complete --timeout 5m

A PyTorchJob (pytorchjob/NAME, or NAME with --kind pytorchjob) is waited for by
its v1 conditions: by default Succeeded (exit 1 when it Failed); --for takes
Created, Running, Restarting, Suspended, Succeeded, Failed. A line is printed
whenever its status, reason or number of active replicas changes.`,
		flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&forStatus, "for", trainer.TrainJobComplete, "statuses to wait for, comma-separated: Created, Pending, Running, Suspended, Complete, Failed (a PyTorchJob: Created, Running, Restarting, Suspended, Succeeded, Failed; default Succeeded)")
			fs.DurationVar(&timeout, "timeout", 10*time.Minute, "give up after this long")
			fs.DurationVar(&interval, "interval", time.Second, "how often to look at the TrainJob")
			kind.addTo(fs)
		},
		run: func(ctx context.Context, e *env, fs *pflag.FlagSet, args []string) error {
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
}

func eventsCommand() *command {
	var output string
	return &command{
		usage:   "NAME [-o yaml|json]",
		summary: "Show the events of a TrainJob, of its JobSet and of its pods, oldest first",
		help: `Reads the namespace's events (core/v1, as the manager and other controllers
write them, and events.k8s.io/v1, as the scheduler does) about the TrainJob, its JobSet (of the same
name) and its pods (labelled jobset.sigs.k8s.io/jobset-name=NAME), oldest first,
in the columns of ` + "`kubectl events`" + `. Events of pods that are gone are not shown.`,
		flags: func(fs *pflag.FlagSet) {
			fs.StringVarP(&output, "output", "o", "", "output format: yaml or json (default: a table)")
		},
		run: func(ctx context.Context, e *env, _ *pflag.FlagSet, args []string) error {
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
}

func deleteCommand() *command {
	var kind kindFlag
	return &command{
		usage:   "NAME... | pytorchjob/NAME...",
		summary: "Delete TrainJobs or PyTorchJobs (their JobSets and pods go with them)",
		flags:   kind.addTo,
		run: func(ctx context.Context, e *env, _ *pflag.FlagSet, args []string) error {
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
}
