package cli

// The logs command: a job's logs, following them until the job ends.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/trainyard/trainyard/pkg/cli/view"
)

func logsCommand(e *env) *cobra.Command {
	var (
		follow bool
		node   int
		step   string
	)
	kind := kindFlag{kinds: e.kinds}
	long, example := e.kinds.help("logs")
	cmd := &cobra.Command{
		Use:   "logs [KIND/]NAME [-f] [--node N | --step STEP]",
		Short: "Print the logs of a job's pods, each line prefixed with its step ([node-N]:, [master-0]:)",
		Long: `Print the logs of a job's pods, each line prefixed with its step ([node-N]:, [master-0]:).

` + long,
		Example:           example,
		ValidArgsFunction: e.completeJobs(false),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, fs := cmd.Context(), cmd.Flags()
			if len(args) != 1 {
				return usagef("logs takes one job name, got %q", args)
			}
			refs, err := kind.jobRefs(args)
			if err != nil {
				return err
			}
			cl, err := e.connect()
			if err != nil {
				return err
			}
			ref := refs[0]
			l, err := ref.Kind.Logs(ctx, cl.Client, cl.Namespace, ref.Name, view.LogOptions{Step: step, Node: node, NodeSet: fs.Changed("node")})
			if err != nil {
				return err
			}
			s := l.Streamer
			s.Client, s.Namespace = cl.Clientset, cl.Namespace
			s.Out = func(line string) { fmt.Fprintln(e.stdout, line) }
			if !follow {
				n, err := s.Print(ctx)
				if err == nil && n == 0 {
					fmt.Fprintln(e.stderr, l.None)
				}
				return err
			}
			finished := make(chan struct{})
			go func() {
				defer close(finished)
				waitGoneOr(ctx, l.Done)
			}()
			if l.Progress != nil {
				go view.FollowProgress(ctx, l.Progress, finished, view.NewProgressPrinter(e.stderr, false))
			}
			s.Follow(ctx, finished, 10*time.Second)
			return ctx.Err()
		},
	}
	fs := cmd.Flags()
	fs.BoolVarP(&follow, "follow", "f", false, "follow the logs until the job finishes")
	fs.IntVar(&node, "node", -1, "only the node of this rank; -1 means every node")
	fs.StringVar(&step, "step", "", "only this step, as 'trainyard get NAME' names them: a TrainJob's node-N, dataset-initializer or model-initializer; another kind's replica, e.g. master-0, worker-N")
	kind.addTo(cmd)
	return cmd
}

// waitGoneOr polls done every second and returns once it says so, or the job
// is gone, or ctx is done. Other errors are transient: it keeps polling.
func waitGoneOr(ctx context.Context, done func(context.Context) (bool, error)) {
	for ctx.Err() == nil {
		ok, err := done(ctx)
		if apierrors.IsNotFound(err) || err == nil && ok {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// help is a command's help from every kind's part of it, the default kind's
// first, and their examples.
func (t kindTable) help(command string) (long, example string) {
	var longs, examples []string
	for _, k := range t {
		l, ex := k.Help(command)
		if l != "" {
			longs = append(longs, l)
		}
		if ex != "" {
			examples = append(examples, ex)
		}
	}
	return strings.Join(longs, "\n\n"), strings.Join(examples, "\n\n")
}
