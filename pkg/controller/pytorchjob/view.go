package pytorchjob

// What the trainyard CLI shows of PyTorchJobs (view.Kind): get, logs, wait,
// delete and completion. Trainyard runs a PyTorchJob as a JobSet named after
// it, one one-pod Job per replica (<job>-master-0, <job>-worker-<i>-0, whose
// pods are <job>-master-0-<suffix>, ...); Kubeflow's training operator ran
// the pods <job>-master-0, <job>-worker-<i> itself. Both label every pod with
// the job (training.kubeflow.org/job-name), the operator
// (training.kubeflow.org/operator-name=pytorchjob-controller) and the replica
// (training.kubeflow.org/replica-type master|worker, replica-index), and both
// run the training in the container "pytorch", so the CLI finds the pods, and
// names them master-0, worker-1 as v1 named them, by those labels alone.

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/cli/logs"
	"github.com/trainyard/trainyard/pkg/cli/view"
)

// Container is the container of every replica that runs the training (v1
// requires it), whose log `logs` prints.
const Container = kubeflowv1.PyTorchJobDefaultContainerName

// View is the PyTorchJob kind in the CLI.
type View struct{}

var _ view.Kind = View{}

// View implements view.Provider.
func (*Kind) View() view.Kind { return View{} }

// Kind implements view.Kind.
func (View) Kind() string { return kubeflowv1.PyTorchJobKind }

// Names implements view.Kind.
func (View) Names() []string { return []string{"pytorchjob", "pytorchjobs"} }

// New implements view.Kind.
func (View) New() client.Object { return &kubeflowv1.PyTorchJob{} }

// Get implements view.Kind.
func (View) Get(ctx context.Context, c client.Client, namespace, name string) (view.Shown, error) {
	j, err := GetJob(ctx, c, namespace, name)
	if err != nil {
		return view.Shown{}, err
	}
	return view.Shown{Data: j, Count: 1, Print: func(w io.Writer, now time.Time) error { return PrintJob(w, j, now) }}, nil
}

// List implements view.Kind.
func (View) List(ctx context.Context, c client.Client, namespace, runtime string) (view.Shown, error) {
	if runtime != "" {
		return view.Shown{}, view.Usagef("--runtime filters TrainJobs; PyTorchJobs have no runtime")
	}
	jobs, err := ListJobs(ctx, c, namespace)
	if err != nil {
		return view.Shown{}, err
	}
	return view.Shown{Data: jobs, Count: len(jobs), Print: func(w io.Writer, now time.Time) error { return PrintJobs(w, jobs, now) }}, nil
}

// Logs implements view.Kind: the log of the pytorch container of every
// replica, or of the one replica --step names (master-0, worker-1), each
// line prefixed with the replica; followed until the job has finished.
func (View) Logs(ctx context.Context, c client.Client, namespace, name string, o view.LogOptions) (*view.Logs, error) {
	if o.NodeSet {
		return nil, view.Usagef("--node is a TrainJob's node; a PyTorchJob's replicas are --step master-0, --step worker-N")
	}
	replica := o.Step
	if t, i, ok := strings.Cut(replica, "-"); replica != "" && (!ok || t == "" || !view.IsCount(i)) {
		return nil, view.Usagef("--step %q: a PyTorchJob's replica is master-0 or worker-N", replica)
	}
	var job kubeflowv1.PyTorchJob
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &job); err != nil {
		return nil, fmt.Errorf("reading PyTorchJob %s/%s: %w", namespace, name, err)
	}
	sel, err := podSelector(name)
	if err != nil {
		return nil, err
	}
	l := &view.Logs{
		Streamer: &logs.Streamer{Job: name, Kind: kubeflowv1.PyTorchJobKind, Selector: sel.String(), Container: Container,
			Name: func(p *corev1.Pod) (string, int, bool) {
				n, order, ok := ReplicaOf(p)
				return n, order, ok && (replica == "" || n == replica)
			}},
		Done: func(ctx context.Context) (bool, error) {
			var job kubeflowv1.PyTorchJob
			err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &job)
			_, done := Ended(&job.Status)
			return done, err
		},
		None: fmt.Sprintf("no replica of PyTorchJob %s has started yet (trainyard logs -f waits for them)", name),
	}
	if replica != "" {
		l.None = fmt.Sprintf("replica %s of PyTorchJob %s has not started yet (trainyard logs -f waits for it; trainyard get pytorchjob/%s lists the replicas)",
			replica, name, name)
	}
	return l, nil
}

// progress is what `wait` reports about a PyTorchJob: its status
// (Condition) and how many of its replicas run.
type progress struct {
	status, reason, message string
	active, replicas        int32
}

func progressOf(job *kubeflowv1.PyTorchJob) progress {
	var p progress
	if c := Condition(&job.Status); c != nil {
		p.status, p.reason, p.message = string(c.Type), c.Reason, c.Message
	}
	for t, rs := range job.Spec.PyTorchReplicaSpecs {
		if rs != nil {
			p.replicas += ptr.Deref(rs.Replicas, 1)
		}
		if st := job.Status.ReplicaStatuses[t]; st != nil {
			p.active += st.Active
		}
	}
	return p
}

func (p progress) String() string {
	if p.status == "" {
		return "no status yet"
	}
	s := p.status
	switch kubeflowv1.JobConditionType(p.status) {
	case kubeflowv1.JobCreated, kubeflowv1.JobRunning, kubeflowv1.JobRestarting:
		if p.replicas > 0 {
			s += fmt.Sprintf(", %d/%d replicas active", p.active, p.replicas)
		}
	}
	return s + view.ReasonText(p.reason, p.message)
}

// Wait implements view.Kind: a PyTorchJob is waited for by its v1
// conditions, by default until it Succeeded.
func (View) Wait() view.Wait {
	return view.Wait{
		Statuses: Statuses,
		Done:     string(kubeflowv1.JobSucceeded),
		Failed:   string(kubeflowv1.JobFailed),
		Look: func(ctx context.Context, c client.Client, namespace, name string) (view.State, error) {
			var job kubeflowv1.PyTorchJob
			if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &job); err != nil {
				return view.State{}, err
			}
			p := progressOf(&job)
			s := view.State{Key: p, Progress: p.String(), In: map[string]bool{}}
			for _, c := range job.Status.Conditions {
				if c.Status == corev1.ConditionTrue {
					s.In[string(c.Type)] = true
				}
			}
			if c, done := Ended(&job.Status); done {
				s.Finished = &view.Finish{Status: string(c.Type), Reason: c.Reason, Message: c.Message}
			}
			return s, nil
		},
	}
}

// Complete implements view.Kind.
func (View) Complete(ctx context.Context, c client.Client, namespace string) map[string]string {
	names := map[string]string{}
	var list kubeflowv1.PyTorchJobList
	if err := c.List(ctx, &list, client.InNamespace(namespace)); err == nil {
		for _, j := range list.Items {
			names[j.Name] = kubeflowv1.PyTorchJobKind
		}
	}
	return names
}

// Help implements view.Kind.
func (View) Help(command string) (string, string) {
	switch command {
	case "get":
		return `A PyTorchJob (kubeflow.org/v1) is pytorchjob/NAME, or NAME with --kind
pytorchjob: its STATUS is the v1 condition it is in (Created, Running,
Restarting, Suspended, Succeeded, Failed), its steps are its replicas' pods,
master-0, worker-0, ... (the pytorch container's device). With --kind
pytorchjob and no NAME, lists the namespace's PyTorchJobs.`, `  # A PyTorchJob, and all of the namespace's
  trainyard get pytorchjob/mnist
  trainyard get --kind pytorchjob`
	case "logs":
		return `A PyTorchJob (pytorchjob/NAME, or NAME with --kind pytorchjob): the log of
every replica's pytorch container, each line prefixed with the replica as v1
named its pods, [master-0]:, [worker-0]:, [worker-1]:; --step master-0 (or
worker-N) only that replica. With -f, until the PyTorchJob has Succeeded or
Failed.`, `  # A PyTorchJob's worker 0
  trainyard logs pytorchjob/mnist --step worker-0`
	case "wait":
		return `A PyTorchJob (pytorchjob/NAME, or NAME with --kind pytorchjob) is waited for by
its v1 conditions: by default Succeeded (exit 1 when it Failed); --for takes
Created, Running, Restarting, Suspended, Succeeded, Failed. A line is printed
whenever its status, reason or number of active replicas changes.`, `  # A PyTorchJob, until it has Succeeded
  trainyard wait pytorchjob/mnist`
	case "delete":
		return "", `  # A PyTorchJob
  trainyard delete pytorchjob/mnist`
	}
	return "", ""
}
