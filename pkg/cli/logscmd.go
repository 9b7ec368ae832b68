package cli

// The logs command: a job's node or initializer logs, following them until the job ends.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/cli/logs"
)

func logsCommand() *command {
	var (
		follow bool
		node   int
		step   string
	)
	return &command{
		usage:   "NAME [-f] [--node N | --step STEP]",
		summary: "Print the logs of a TrainJob's nodes, each line prefixed with [node-N]:",
		help: `Without -f, prints what every node (or node N) has logged so far, node by node.
With -f, follows every node while the TrainJob runs, including pods that start
later and containers that restart, and returns once the TrainJob has finished
and the logs have ended.

--step takes the SDK's step names: node-N is --node N; dataset-initializer and
model-initializer print that initializer's container log, each line prefixed
with [dataset-initializer]: (or [model-initializer]:); with -f, until the
initializer's pods have finished (or the TrainJob has).`,
		flags: func(fs *pflag.FlagSet) {
			fs.BoolVarP(&follow, "follow", "f", false, "follow the logs until the TrainJob finishes")
			fs.IntVar(&node, "node", -1, "only the node of this rank; -1 means every node")
			fs.StringVar(&step, "step", "", "only this step: node-N, dataset-initializer or model-initializer (see `trainyard get NAME`)")
		},
		run: func(ctx context.Context, e *env, fs *pflag.FlagSet, args []string) error {
			if len(args) != 1 {
				return usagef("logs takes one TrainJob name, got %q", args)
			}
			initializer := ""
			switch {
			case step == "":
			case fs.Changed("node"):
				return usagef("--node and --step: give one of them")
			case step == trainer.AncestorDatasetInitializer || step == trainer.AncestorModelInitializer:
				initializer = step
			case strings.HasPrefix(step, "node-") && isCount(strings.TrimPrefix(step, "node-")):
				node, _ = strconv.Atoi(strings.TrimPrefix(step, "node-"))
			default:
				return usagef("--step %q: want node-N, %s or %s", step, trainer.AncestorDatasetInitializer, trainer.AncestorModelInitializer)
			}
			cl, err := e.connect()
			if err != nil {
				return err
			}
			name := args[0]
			var job trainer.TrainJob
			if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: cl.Namespace, Name: name}, &job); err != nil {
				return fmt.Errorf("reading TrainJob %s/%s: %w", cl.Namespace, name, err)
			}
			s := &logs.Streamer{Client: cl.Clientset, Namespace: cl.Namespace, Job: name, Node: node,
				Out: func(l string) { fmt.Fprintln(e.stdout, l) }}
			if initializer != "" {
				inits := InitializerSteps(jobSetOf(ctx, cl.Client, cl.Namespace, name))
				s.Step, s.Container = initializer, initializer
				s.Select = func(p *corev1.Pod) bool { return StepOf(p, inits) == initializer }
			}
			if !follow {
				n, err := s.Print(ctx)
				if err == nil && n == 0 {
					what := "no node"
					if initializer != "" {
						what = "no " + initializer + " pod"
					}
					fmt.Fprintf(e.stderr, "%s of TrainJob %s has started yet (trainyard logs -f waits for them)\n", what, name)
				}
				return err
			}
			finished := make(chan struct{})
			go func() {
				defer close(finished)
				if initializer != "" {
					watchStepFinished(ctx, cl, name, s.Select)
					return
				}
				watchFinished(ctx, cl.Client, cl.Namespace, name)
			}()
			if initializer == "" {
				go followProgress(ctx, cl.Client, cl.Namespace, name, finished, newProgressPrinter(e.stderr, false))
			}
			s.Follow(ctx, finished, 10*time.Second)
			return ctx.Err()
		},
	}
}

// watchStepFinished returns once the TrainJob has finished or is gone, or the
// step has pods and all of them have finished, or ctx is done.
func watchStepFinished(ctx context.Context, cl *Clients, name string, selectPod func(*corev1.Pod) bool) {
	for ctx.Err() == nil {
		var job trainer.TrainJob
		err := cl.Client.Get(ctx, client.ObjectKey{Namespace: cl.Namespace, Name: name}, &job)
		if apierrors.IsNotFound(err) {
			return
		}
		if _, done := Finished(&job); err == nil && done {
			return
		}
		pods, err := cl.Clientset.CoreV1().Pods(cl.Namespace).List(ctx, metav1.ListOptions{LabelSelector: logs.JobSetNameLabel + "=" + name})
		if err == nil {
			n, ended := 0, 0
			for i := range pods.Items {
				p := &pods.Items[i]
				if !selectPod(p) {
					continue
				}
				n++
				if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
					ended++
				}
			}
			if n > 0 && ended == n {
				return
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// watchFinished returns once the TrainJob is Complete, Failed or gone, or ctx is done.
func watchFinished(ctx context.Context, c client.Client, namespace, name string) {
	for ctx.Err() == nil {
		var job trainer.TrainJob
		err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &job)
		if apierrors.IsNotFound(err) {
			return
		}
		if _, done := Finished(&job); err == nil && done {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}
