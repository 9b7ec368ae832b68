package cli

// The logs command: a job's node or initializer logs, following them until the job ends.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/cli/logs"
)

func logsCommand(e *env) *cobra.Command {
	var (
		follow bool
		node   int
		step   string
		kind   kindFlag
	)
	cmd := &cobra.Command{
		Use:   "logs NAME [-f] [--node N | --step STEP] | pytorchjob/NAME [-f] [--step REPLICA]",
		Short: "Print the logs of a TrainJob's nodes (or a PyTorchJob's replicas), each line prefixed with [node-N]: ([master-0]:)",
		Long: `Print the logs of a TrainJob's nodes (or a PyTorchJob's replicas), each line prefixed with [node-N]: ([master-0]:).

Without -f, prints what every node (or node N) has logged so far, node by node.
With -f, follows every node while the TrainJob runs, including pods that start
later and containers that restart, and returns once the TrainJob has finished
and the logs have ended.

--step takes the SDK's step names: node-N is --node N; dataset-initializer and
model-initializer print that initializer's container log, each line prefixed
with [dataset-initializer]: (or [model-initializer]:); with -f, until the
initializer's pods have finished (or the TrainJob has).

A PyTorchJob (pytorchjob/NAME, or NAME with --kind pytorchjob): the log of
every replica's pytorch container, each line prefixed with the replica as v1
named its pods, [master-0]:, [worker-0]:, [worker-1]:; --step master-0 (or
worker-N) only that replica. With -f, until the PyTorchJob has Succeeded or
Failed.`,
		Example: `  # Every node's logs so far
  trainyard logs my-job

  # Follow them until the TrainJob has finished
  trainyard logs -f my-job

  # Only node 1, or only the dataset initializer
  trainyard logs my-job --step node-1
  trainyard logs my-job --step dataset-initializer

  # A PyTorchJob's worker 0
  trainyard logs pytorchjob/mnist --step worker-0`,
		ValidArgsFunction: e.completeJobs(false),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, fs := cmd.Context(), cmd.Flags()
			if len(args) != 1 {
				return usagef("logs takes one TrainJob name, got %q", args)
			}
			refs, err := kind.jobRefs(args)
			if err != nil {
				return err
			}
			if refs[0].IsPyTorchJob() {
				if fs.Changed("node") {
					return usagef("--node is a TrainJob's node; a PyTorchJob's replicas are --step master-0, --step worker-N")
				}
				if t, i, ok := strings.Cut(step, "-"); step != "" && (!ok || t == "" || !isCount(i)) {
					return usagef("--step %q: a PyTorchJob's replica is master-0 or worker-N", step)
				}
				cl, err := e.connect()
				if err != nil {
					return err
				}
				return pyTorchJobLogs(ctx, e, cl, refs[0].Name, step, follow)
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
			name := refs[0].Name
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
	fs := cmd.Flags()
	fs.BoolVarP(&follow, "follow", "f", false, "follow the logs until the TrainJob finishes")
	fs.IntVar(&node, "node", -1, "only the node of this rank; -1 means every node")
	fs.StringVar(&step, "step", "", "only this step: node-N, dataset-initializer or model-initializer (see 'trainyard get NAME'); of a PyTorchJob, a replica: master-0, worker-N")
	kind.addTo(cmd)
	return cmd
}

// pyTorchJobLogs prints (with follow, follows until the job has finished) the
// log of the pytorch container of every replica of a PyTorchJob, or of the one
// replica named (master-0, worker-1), each line prefixed with the replica.
func pyTorchJobLogs(ctx context.Context, e *env, cl *Clients, name, replica string, follow bool) error {
	var job kubeflowv1.PyTorchJob
	if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: cl.Namespace, Name: name}, &job); err != nil {
		return fmt.Errorf("reading PyTorchJob %s/%s: %w", cl.Namespace, name, err)
	}
	sel, err := pyTorchJobSelector(name)
	if err != nil {
		return err
	}
	s := &logs.Streamer{Client: cl.Clientset, Namespace: cl.Namespace, Job: name, Kind: kubeflowv1.PyTorchJobKind,
		Selector: sel.String(), Container: PyTorchJobContainer, Out: func(l string) { fmt.Fprintln(e.stdout, l) },
		Name: func(p *corev1.Pod) (string, int, bool) {
			n, order, ok := ReplicaOf(p)
			return n, order, ok && (replica == "" || n == replica)
		}}
	if !follow {
		n, err := s.Print(ctx)
		switch {
		case err != nil || n > 0:
		case replica != "":
			fmt.Fprintf(e.stderr, "replica %s of PyTorchJob %s has not started yet (trainyard logs -f waits for it; trainyard get %s lists the replicas)\n",
				replica, name, JobRef{Kind: kubeflowv1.PyTorchJobKind, Name: name})
		default:
			fmt.Fprintf(e.stderr, "no replica of PyTorchJob %s has started yet (trainyard logs -f waits for them)\n", name)
		}
		return err
	}
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		waitGoneOr(ctx, func() (bool, error) {
			var job kubeflowv1.PyTorchJob
			err := cl.Client.Get(ctx, client.ObjectKey{Namespace: cl.Namespace, Name: name}, &job)
			_, done := PyTorchJobFinished(&job.Status)
			return done, err
		})
	}()
	s.Follow(ctx, finished, 10*time.Second)
	return ctx.Err()
}

// waitGoneOr polls done every second and returns once it says so, or the job
// is gone, or ctx is done. Other errors are transient: it keeps polling.
func waitGoneOr(ctx context.Context, done func() (bool, error)) {
	for ctx.Err() == nil {
		ok, err := done()
		if apierrors.IsNotFound(err) || err == nil && ok {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
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
	waitGoneOr(ctx, func() (bool, error) {
		var job trainer.TrainJob
		err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &job)
		_, done := Finished(&job)
		return done, err
	})
}
