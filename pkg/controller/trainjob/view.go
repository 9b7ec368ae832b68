package trainjob

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/cli/logs"
	"github.com/trainyard/trainyard/pkg/cli/view"
)

// View is the TrainJob kind in the CLI (view.Kind): what get, logs, wait,
// delete and completion do with TrainJobs, the SDK's way (cli.go).
type View struct{}

var _ view.Kind = View{}

// View implements view.Provider.
func (*Kind) View() view.Kind { return View{} }

// Kind implements view.Kind.
func (View) Kind() string { return trainer.TrainJobKind }

// Names implements view.Kind.
func (View) Names() []string { return []string{"trainjob", "trainjobs", "tj"} }

// New implements view.Kind.
func (View) New() client.Object { return &trainer.TrainJob{} }

// Get implements view.Kind.
func (View) Get(ctx context.Context, c client.Client, namespace, name string) (view.Shown, error) {
	j, err := GetJob(ctx, c, namespace, name)
	if err != nil {
		return view.Shown{}, err
	}
	return view.Shown{Data: j, Count: 1, Print: func(w io.Writer, now time.Time) error { return PrintJob(w, j, now) }}, nil
}

// List implements view.Kind: the namespace's TrainJobs, those on runtime
// when it is set.
func (View) List(ctx context.Context, c client.Client, namespace, runtime string) (view.Shown, error) {
	jobs, err := ListJobs(ctx, c, namespace)
	if err != nil {
		return view.Shown{}, err
	}
	if runtime != "" {
		jobs = OnRuntime(jobs, runtime)
	}
	return view.Shown{Data: jobs, Count: len(jobs), Print: func(w io.Writer, now time.Time) error { return PrintJobs(w, jobs, now) }}, nil
}

// PrintJobs writes TrainJobs as a table.
func PrintJobs(w io.Writer, jobs []Job, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tRUNTIME\tNODES\tSTATUS\tREASON\tAGE")
	for _, j := range jobs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", j.Name, j.Runtime, j.NumNodes, j.Status, view.OrDash(j.Reason), view.Age(j.CreationTimestamp, now))
	}
	return tw.Flush()
}

// PrintJob writes one TrainJob with its steps, a step per line as the SDK prints them.
func PrintJob(w io.Writer, j Job, now time.Time) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Name:      %s\n", j.Name)
	fmt.Fprintf(&b, "Namespace: %s\n", j.Namespace)
	fmt.Fprintf(&b, "Runtime:   %s\n", j.Runtime)
	fmt.Fprintf(&b, "Nodes:     %d\n", j.NumNodes)
	fmt.Fprintf(&b, "Status:    %s\n", j.Status)
	if j.Reason != "" {
		fmt.Fprintf(&b, "Reason:    %s\n", j.Reason)
	}
	if j.Message != "" {
		fmt.Fprintf(&b, "Message:   %s\n", j.Message)
	}
	if st := j.TrainerStatus; st != nil {
		if st.ProgressPercentage != nil || st.EstimatedRemainingSeconds != nil {
			fmt.Fprintf(&b, "Progress:  %s\n", view.ProgressText(&trainer.TrainerStatus{
				ProgressPercentage: st.ProgressPercentage, EstimatedRemainingSeconds: st.EstimatedRemainingSeconds}))
		}
		if len(st.Metrics) > 0 {
			fmt.Fprintf(&b, "Metrics:   %s\n", view.MetricsText(st.Metrics))
		}
		if !st.LastUpdatedTime.IsZero() {
			fmt.Fprintf(&b, "Reported:  %s ago\n", duration.HumanDuration(now.Sub(st.LastUpdatedTime.Time)))
		}
	}
	fmt.Fprintf(&b, "Age:       %s\n", view.Age(j.CreationTimestamp, now))
	view.WriteSteps(&b, j.Steps)
	_, err := io.WriteString(w, b.String())
	return err
}

// Logs implements view.Kind: every node's log (--node N or --step node-N:
// one node's), or an initializer's (--step dataset-initializer,
// model-initializer); followed until the TrainJob (or the initializer's
// pods) finished, with the progress the training code reports.
func (View) Logs(ctx context.Context, c client.Client, namespace, name string, o view.LogOptions) (*view.Logs, error) {
	node, initializer := o.Node, ""
	switch step := o.Step; {
	case step == "":
	case o.NodeSet:
		return nil, view.Usagef("--node and --step: give one of them")
	case step == trainer.AncestorDatasetInitializer || step == trainer.AncestorModelInitializer:
		initializer = step
	case strings.HasPrefix(step, "node-") && view.IsCount(strings.TrimPrefix(step, "node-")):
		node, _ = strconv.Atoi(strings.TrimPrefix(step, "node-"))
	default:
		return nil, view.Usagef("--step %q: want node-N, %s or %s", step, trainer.AncestorDatasetInitializer, trainer.AncestorModelInitializer)
	}
	var job trainer.TrainJob
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &job); err != nil {
		return nil, fmt.Errorf("reading TrainJob %s/%s: %w", namespace, name, err)
	}
	l := &view.Logs{
		Streamer: &logs.Streamer{Job: name, Node: node},
		Done:     func(ctx context.Context) (bool, error) { return trainJobDone(ctx, c, namespace, name) },
		Progress: func(ctx context.Context) *trainer.TrainerStatus {
			var job trainer.TrainJob
			if c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &job) != nil {
				return nil
			}
			return job.Status.TrainerStatus
		},
		None: fmt.Sprintf("no node of TrainJob %s has started yet (trainyard logs -f waits for them)", name),
	}
	if initializer == "" {
		return l, nil
	}
	inits := InitializerSteps(jobSetOf(ctx, c, namespace, name))
	s := l.Streamer
	s.Step, s.Container = initializer, initializer
	s.Select = func(p *corev1.Pod) bool { return StepOf(p, inits) == initializer }
	l.Done = func(ctx context.Context) (bool, error) { return stepDone(ctx, c, namespace, name, s.Select) }
	l.Progress = nil
	l.None = fmt.Sprintf("no %s pod of TrainJob %s has started yet (trainyard logs -f waits for them)", initializer, name)
	return l, nil
}

// trainJobDone reports whether the TrainJob is Complete or Failed.
func trainJobDone(ctx context.Context, c client.Client, namespace, name string) (bool, error) {
	var job trainer.TrainJob
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &job)
	_, done := Finished(&job)
	return done, err
}

// stepDone reports whether the TrainJob has finished, or the step has pods
// and all of them have finished.
func stepDone(ctx context.Context, c client.Client, namespace, name string, selectPod func(*corev1.Pod) bool) (bool, error) {
	if done, err := trainJobDone(ctx, c, namespace, name); err != nil || done {
		return done, err
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{logs.JobSetNameLabel: name}); err != nil {
		return false, nil // transient: look again
	}
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
	return n > 0 && ended == n, nil
}

// Statuses `wait --for` accepts: the SDK's TrainJob statuses (Created, Running,
// Complete, Failed) and the phases Pending and Suspended.
var Statuses = []string{trainer.TrainJobCreated, string(trainer.TrainJobPending), string(trainer.TrainJobRunning),
	string(trainer.TrainJobSuspended), trainer.TrainJobComplete, trainer.TrainJobFailed}

// progress is what `wait` reports about a TrainJob; a line is printed whenever
// it changes (the controller writes the message only on changes of state).
type progress struct {
	phase, reason, message string
	ready, nodes           int32
}

func progressOf(job *trainer.TrainJob) progress {
	p := progress{phase: string(job.Status.Phase), reason: job.Status.Reason, message: job.Status.Message}
	if job.Status.ReadyNodes != nil {
		p.ready = *job.Status.ReadyNodes
	}
	if job.Status.NumNodes != nil {
		p.nodes = *job.Status.NumNodes
	}
	if p.phase == "" {
		p.phase = "Created" // not reconciled yet (or by a controller without phases)
	}
	return p
}

func (p progress) String() string {
	s := p.phase
	if p.nodes > 0 && (p.phase == string(trainer.TrainJobPending) || p.phase == string(trainer.TrainJobRunning)) {
		s += fmt.Sprintf(", %d/%d nodes ready", p.ready, p.nodes)
	}
	return s + view.ReasonText(p.reason, p.message)
}

// Wait implements view.Kind: by default until the TrainJob is Complete.
func (View) Wait() view.Wait {
	return view.Wait{
		Statuses: Statuses,
		Done:     trainer.TrainJobComplete,
		Failed:   trainer.TrainJobFailed,
		Look: func(ctx context.Context, c client.Client, namespace, name string) (view.State, error) {
			var job trainer.TrainJob
			if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &job); err != nil {
				return view.State{}, err
			}
			p := progressOf(&job)
			// Created: the SDK's meaning, the TrainJob exists (and has not finished).
			s := view.State{Key: p, Progress: p.String(), TrainerStatus: job.Status.TrainerStatus, In: map[string]bool{trainer.TrainJobCreated: true}}
			if job.Status.Phase != "" {
				s.In[string(job.Status.Phase)] = true
			}
			if c, done := Finished(&job); done {
				s.Finished = &view.Finish{Status: c.Type, Reason: c.Reason, Message: c.Message}
			}
			return s, nil
		},
	}
}

// Complete implements view.Kind: each TrainJob with its phase.
func (View) Complete(ctx context.Context, c client.Client, namespace string) map[string]string {
	names := map[string]string{}
	var list trainer.TrainJobList
	if err := c.List(ctx, &list, client.InNamespace(namespace)); err == nil {
		for _, j := range list.Items {
			names[j.Name] = "TrainJob " + string(j.Status.Phase)
		}
	}
	return names
}

// Help implements view.Kind.
func (View) Help(command string) (string, string) {
	switch command {
	case "get":
		return `STATUS is the TrainJob's phase (Pending, Running, Suspended, Complete, Failed),
with its reason and message. Each step is a pod: node-<rank> for the trainer's
nodes, with the pod's phase and its device (from the node container's limits;
the count is PET_NPROC_PER_NODE, torchrun's processes per node, when it is a
number). Initializer pods (of the replicated jobs labelled
trainer.kubeflow.org/trainjob-ancestor-step=dataset-initializer or
model-initializer) are the steps dataset-initializer and model-initializer.
Without NAME, lists the namespace's TrainJobs; --runtime lists only those on
that runtime (spec.runtimeRef.name).`, `  # The namespace's TrainJobs, and those on one runtime
  trainyard get
  trainyard get --runtime torch-distributed

  # One TrainJob with its steps, as JSON
  trainyard get my-job -o json`
	case "logs":
		return `Without -f, prints what every node (or node N) has logged so far, node by node.
With -f, follows every node while the TrainJob runs, including pods that start
later and containers that restart, and returns once the TrainJob has finished
and the logs have ended.

--step takes the SDK's step names: node-N is --node N; dataset-initializer and
model-initializer print that initializer's container log, each line prefixed
with [dataset-initializer]: (or [model-initializer]:); with -f, until the
initializer's pods have finished (or the TrainJob has).`, `  # Every node's logs so far
  trainyard logs my-job

  # Follow them until the TrainJob has finished
  trainyard logs -f my-job

  # Only node 1, or only the dataset initializer
  trainyard logs my-job --step node-1
  trainyard logs my-job --step dataset-initializer`
	case "wait":
		return `Prints a line whenever the TrainJob's phase, reason or number of ready nodes
changes. By default waits for Complete: exits 0 when it is Complete, 1 when it
Failed (with the reason and message), 3 when the timeout passes first.

--for takes a comma-separated set of statuses, as the SDK's
wait_for_job_status(status={...}): Created (the TrainJob exists and has not
finished), Pending, Running, Suspended (status.phase), Complete, Failed. Exits 0
as soon as the TrainJob is in any of them; 1 when it Failed and Failed is not in
the set, or it finished in another status; 3 on timeout.`, `  # Until the TrainJob has finished: exit 0 when Complete, 1 when Failed, 3 after 10 minutes
  trainyard wait my-job

  # Until it runs (or has finished), for at most 5 minutes
  trainyard wait my-job --for Running,Complete --timeout 5m`
	case "delete":
		return "", `  # Two TrainJobs
  trainyard delete my-job other-job`
	}
	return "", ""
}
