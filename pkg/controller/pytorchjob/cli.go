package pytorchjob

// What the CLI reads and prints of a PyTorchJob (its view, view.go, shows
// it): the job with its replicas, pods and steps, read from the API.

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
