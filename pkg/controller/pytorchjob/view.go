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
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
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

// Job is what the CLI shows of a PyTorchJob: its replicas, its status
// (the v1 condition that says where it is, with its reason and message) and its
// steps, one per pod, named after the replica (master-0, worker-1).
type Job struct {
	Name              string         `json:"name"`
	Namespace         string         `json:"namespace"`
	CreationTimestamp metav1.Time    `json:"creationTimestamp"`
	Replicas          []ReplicaCount `json:"replicas"`
	// Status is a v1 condition type (Created, Running, Restarting, Suspended,
	// Succeeded, Failed; see Condition); empty before the controller wrote
	// any.
	Status  string      `json:"status,omitempty"`
	Reason  string      `json:"reason,omitempty"`
	Message string      `json:"message,omitempty"`
	Steps   []view.Step `json:"steps"`
}

// ReplicaCount is the number of pods of one replica type.
type ReplicaCount struct {
	Type  string `json:"type"`
	Count int32  `json:"count"`
}

// ReplicasString is "Master 1, Worker 2".
func ReplicasString(rs []ReplicaCount) string {
	parts := make([]string, 0, len(rs))
	for _, r := range rs {
		parts = append(parts, fmt.Sprintf("%s %d", r.Type, r.Count))
	}
	return strings.Join(parts, ", ")
}

// Statuses are the statuses `wait --for` takes for a PyTorchJob: the v1
// condition types.
var Statuses = []string{string(kubeflowv1.JobCreated), string(kubeflowv1.JobRunning), string(kubeflowv1.JobRestarting),
	string(kubeflowv1.JobSuspended), string(kubeflowv1.JobSucceeded), string(kubeflowv1.JobFailed)}

// conditionPrecedence decides which of several True conditions is the job's
// status: a finished job is Failed or Succeeded whatever else is True, a
// suspended one Suspended; Restarting and Running replace each other, and
// Created stays True from the start. (kubectl's State column shows the last
// condition instead, which is Suspended=False after a resume.)
var conditionPrecedence = []kubeflowv1.JobConditionType{kubeflowv1.JobFailed, kubeflowv1.JobSucceeded,
	kubeflowv1.JobSuspended, kubeflowv1.JobRestarting, kubeflowv1.JobRunning, kubeflowv1.JobCreated}

// Condition is the condition that is the job's status (see
// conditionPrecedence), or nil before the controller wrote any True one.
func Condition(st *kubeflowv1.JobStatus) *kubeflowv1.JobCondition {
	for _, t := range conditionPrecedence {
		for i := range st.Conditions {
			if c := &st.Conditions[i]; c.Type == t && c.Status == corev1.ConditionTrue {
				return c
			}
		}
	}
	return nil
}

// Ended returns the Succeeded or Failed condition of a finished job.
func Ended(st *kubeflowv1.JobStatus) (*kubeflowv1.JobCondition, bool) {
	c := Condition(st)
	if c != nil && (c.Type == kubeflowv1.JobSucceeded || c.Type == kubeflowv1.JobFailed) {
		return c, true
	}
	return nil, false
}

// podSelector selects the pods of the named PyTorchJobs (of every
// PyTorchJob when no name is given).
func podSelector(names ...string) (labels.Selector, error) {
	op, vals := selection.Exists, []string(nil)
	if len(names) > 0 {
		op, vals = selection.In, names
	}
	byJob, err := labels.NewRequirement(kubeflowv1.JobNameLabel, op, vals)
	if err != nil {
		return nil, fmt.Errorf("selecting the pods of PyTorchJobs %v: %w", names, err)
	}
	byOperator, err := labels.NewRequirement(kubeflowv1.OperatorNameLabel, selection.Equals, []string{kubeflowv1.PyTorchJobOperatorName})
	if err != nil {
		return nil, fmt.Errorf("selecting the pods of PyTorchJobs: %w", err)
	}
	return labels.NewSelector().Add(*byJob, *byOperator), nil
}

// ReplicaOf names a PyTorchJob's pod after its replica as v1 named the pods:
// the lower-case replica type and the replica index, e.g. master-0, worker-1.
// order puts the Master first, then the workers by index. The index is the
// replica-index label, else (the workers of an elastic job rendered by earlier
// Trainyard versions shared one Indexed Job) the Job completion index.
func ReplicaOf(p *corev1.Pod) (name string, order int, ok bool) {
	rtype := strings.ToLower(p.Labels[kubeflowv1.ReplicaTypeLabel])
	if rtype == "" {
		return "", 0, false
	}
	index, err := strconv.Atoi(p.Labels[kubeflowv1.ReplicaIndexLabel])
	if err != nil {
		if index, ok = logs.Rank(p); !ok {
			return "", 0, false
		}
	}
	// Masters, then workers, then any other type, each by index.
	const perType = 1 << 20
	switch rtype {
	case strings.ToLower(string(kubeflowv1.PyTorchJobReplicaTypeMaster)):
	case strings.ToLower(string(kubeflowv1.PyTorchJobReplicaTypeWorker)):
		order = perType
	default:
		order = 2 * perType
	}
	return rtype + "-" + strconv.Itoa(index), order + index, true
}

// steps turns a PyTorchJob's pods into steps named after their replicas
// (ReplicaOf), Master first, a replica's replaced pods by creation.
func steps(pods []corev1.Pod) []view.Step {
	type row struct {
		view.Step
		order   int
		created metav1.Time
	}
	var rows []row
	for i := range pods {
		p := &pods[i]
		name, order, ok := ReplicaOf(p)
		if !ok {
			continue
		}
		rows = append(rows, row{Step: view.StepOfPod(p, name, Container), order: order, created: p.CreationTimestamp})
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].order != rows[j].order {
			return rows[i].order < rows[j].order
		}
		return rows[i].created.Before(&rows[j].created)
	})
	out := make([]view.Step, 0, len(rows))
	for _, r := range rows {
		out = append(out, r.Step)
	}
	return out
}

// NewJob describes a PyTorchJob from the object and its pods.
func NewJob(job *kubeflowv1.PyTorchJob, pods []corev1.Pod) Job {
	j := Job{Name: job.Name, Namespace: job.Namespace, CreationTimestamp: job.CreationTimestamp,
		Replicas: []ReplicaCount{}, Steps: steps(pods)}
	types := make([]string, 0, len(job.Spec.PyTorchReplicaSpecs))
	for t := range job.Spec.PyTorchReplicaSpecs {
		types = append(types, string(t))
	}
	// Master first, as v1 lists the roles; others by name.
	sort.Slice(types, func(a, b int) bool {
		ma, mb := types[a] == string(kubeflowv1.PyTorchJobReplicaTypeMaster), types[b] == string(kubeflowv1.PyTorchJobReplicaTypeMaster)
		if ma != mb {
			return ma
		}
		return types[a] < types[b]
	})
	for _, t := range types {
		if rs := job.Spec.PyTorchReplicaSpecs[kubeflowv1.ReplicaType(t)]; rs != nil {
			// v1 defaults an unset count to 1.
			j.Replicas = append(j.Replicas, ReplicaCount{Type: t, Count: ptr.Deref(rs.Replicas, 1)})
		}
	}
	if c := Condition(&job.Status); c != nil {
		j.Status, j.Reason, j.Message = string(c.Type), c.Reason, c.Message
	}
	return j
}

// GetJob reads a PyTorchJob and its pods.
func GetJob(ctx context.Context, c client.Client, namespace, name string) (Job, error) {
	var job kubeflowv1.PyTorchJob
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &job); err != nil {
		return Job{}, fmt.Errorf("reading PyTorchJob %s/%s: %w", namespace, name, err)
	}
	sel, err := podSelector(name)
	if err != nil {
		return Job{}, err
	}
	pods, err := view.Pods(ctx, c, namespace, client.MatchingLabelsSelector{Selector: sel})
	if err != nil {
		return Job{}, fmt.Errorf("listing the pods of PyTorchJob %s/%s: %w", namespace, name, err)
	}
	return NewJob(&job, pods), nil
}

// ListJobs reads the namespace's PyTorchJobs, ordered by creation, each
// with its steps.
func ListJobs(ctx context.Context, c client.Client, namespace string) ([]Job, error) {
	var list kubeflowv1.PyTorchJobList
	if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing PyTorchJobs in namespace %s: %w", namespace, err)
	}
	sel, err := podSelector()
	if err != nil {
		return nil, err
	}
	pods, err := view.Pods(ctx, c, namespace, client.MatchingLabelsSelector{Selector: sel})
	if err != nil {
		return nil, fmt.Errorf("listing PyTorchJob pods in namespace %s: %w", namespace, err)
	}
	byJob := map[string][]corev1.Pod{}
	for _, p := range pods {
		n := p.Labels[kubeflowv1.JobNameLabel]
		byJob[n] = append(byJob[n], p)
	}
	sort.SliceStable(list.Items, func(i, j int) bool {
		a, b := list.Items[i], list.Items[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
	jobs := make([]Job, 0, len(list.Items))
	for i := range list.Items {
		jobs = append(jobs, NewJob(&list.Items[i], byJob[list.Items[i].Name]))
	}
	return jobs, nil
}

// PrintJobs writes PyTorchJobs as a table.
func PrintJobs(w io.Writer, jobs []Job, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tREPLICAS\tSTATUS\tREASON\tAGE")
	for _, j := range jobs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", j.Name, view.OrDash(ReplicasString(j.Replicas)), view.OrDash(j.Status), view.OrDash(j.Reason),
			view.Age(j.CreationTimestamp, now))
	}
	return tw.Flush()
}

// PrintJob writes one PyTorchJob with its steps, as a TrainJob's are written.
func PrintJob(w io.Writer, j Job, now time.Time) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Name:      %s\n", j.Name)
	fmt.Fprintf(&b, "Namespace: %s\n", j.Namespace)
	fmt.Fprintf(&b, "Kind:      %s\n", kubeflowv1.PyTorchJobKind)
	fmt.Fprintf(&b, "Replicas:  %s\n", view.OrDash(ReplicasString(j.Replicas)))
	fmt.Fprintf(&b, "Status:    %s\n", view.OrDash(j.Status))
	if j.Reason != "" {
		fmt.Fprintf(&b, "Reason:    %s\n", j.Reason)
	}
	if j.Message != "" {
		fmt.Fprintf(&b, "Message:   %s\n", j.Message)
	}
	fmt.Fprintf(&b, "Age:       %s\n", view.Age(j.CreationTimestamp, now))
	view.WriteSteps(&b, j.Steps)
	_, err := io.WriteString(w, b.String())
	return err
}

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
