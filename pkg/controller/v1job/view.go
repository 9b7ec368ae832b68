package v1job

// What the trainyard CLI shows of a kubeflow.org/v1 kind's jobs (view.Kind):
// get, logs, wait, delete and completion. Trainyard runs each replica as a
// one-pod Job of the job's JobSet, labelled as v1 labelled its pods (job
// name, operator name, replica type and index), so the CLI finds the pods,
// and names them launcher-0, worker-1 as v1 named them, by those labels.

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
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

// View is a v1 kind in the CLI.
type View struct{ Def *Def }

var _ view.Kind = View{}

// Kind implements view.Kind.
func (v View) Kind() string { return v.Def.Kind }

// Names implements view.Kind.
func (v View) Names() []string { return []string{v.Def.Name, v.Def.Resource} }

// New implements view.Kind.
func (v View) New() client.Object { return v.Def.New() }

// Statuses are the statuses `wait --for` takes: the v1 condition types.
var Statuses = []string{string(kubeflowv1.JobCreated), string(kubeflowv1.JobRunning), string(kubeflowv1.JobRestarting),
	string(kubeflowv1.JobSuspended), string(kubeflowv1.JobSucceeded), string(kubeflowv1.JobFailed)}

// precedence decides which of several True conditions is the job's status.
var precedence = []kubeflowv1.JobConditionType{kubeflowv1.JobFailed, kubeflowv1.JobSucceeded,
	kubeflowv1.JobSuspended, kubeflowv1.JobRestarting, kubeflowv1.JobRunning, kubeflowv1.JobCreated}

// Condition is the condition that is the job's status, or nil.
func Condition(st *kubeflowv1.JobStatus) *kubeflowv1.JobCondition {
	for _, t := range precedence {
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

// podSelector selects the pods of the named jobs (of every job of the kind
// when no name is given).
func (v View) podSelector(names ...string) (labels.Selector, error) {
	op, vals := selection.Exists, []string(nil)
	if len(names) > 0 {
		op, vals = selection.In, names
	}
	byJob, err := labels.NewRequirement(kubeflowv1.JobNameLabel, op, vals)
	if err != nil {
		return nil, fmt.Errorf("selecting the pods of %ss %v: %w", v.Def.Kind, names, err)
	}
	byOperator, err := labels.NewRequirement(kubeflowv1.OperatorNameLabel, selection.Equals, []string{v.Def.OperatorName})
	if err != nil {
		return nil, err
	}
	return labels.NewSelector().Add(*byJob, *byOperator), nil
}

// replicaOf names a pod after its replica as v1 named the pods (launcher-0,
// worker-1); order follows the kind's roles, then the index.
func (v View) replicaOf(p *corev1.Pod) (name string, order int, ok bool) {
	t, ok := v.Def.ReplicaTypeOf(p.Labels[kubeflowv1.ReplicaTypeLabel])
	if !ok {
		return "", 0, false
	}
	index, err := strconv.Atoi(p.Labels[kubeflowv1.ReplicaIndexLabel])
	if err != nil {
		return "", 0, false
	}
	const perType = 1 << 20
	for i, r := range v.Def.Roles {
		if r == t {
			order = i * perType
		}
	}
	return LowerType(t) + "-" + strconv.Itoa(index), order + index, true
}

// container is the container whose log and device a replica's step shows.
func (v View) container(p *corev1.Pod) string {
	return p.Spec.Containers[ContainerIndex(&p.Spec, v.Def.Container)].Name
}

func (v View) steps(pods []corev1.Pod) []view.Step {
	type row struct {
		view.Step
		order   int
		created metav1.Time
	}
	var rows []row
	for i := range pods {
		p := &pods[i]
		name, order, ok := v.replicaOf(p)
		if !ok || len(p.Spec.Containers) == 0 {
			continue
		}
		rows = append(rows, row{Step: view.StepOfPod(p, name, v.container(p)), order: order, created: p.CreationTimestamp})
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

func (v View) shown(job Job, pods []corev1.Pod) Shown {
	s := Shown{Name: job.GetName(), Namespace: job.GetNamespace(), Kind: v.Def.Kind, CreationTimestamp: job.GetCreationTimestamp(),
		Replicas: []ReplicaCount{}, Steps: v.steps(pods)}
	dj := v.Def.Defaulted(job)
	for _, t := range v.Def.RolesOf(dj) {
		s.Replicas = append(s.Replicas, ReplicaCount{Type: string(t), Count: ptr.Deref(dj.ReplicaSpecs()[t].Replicas, 1)})
	}
	if c := Condition(job.JobStatus()); c != nil {
		s.Status, s.Reason, s.Message = string(c.Type), c.Reason, c.Message
	}
	return s
}

func (v View) get(ctx context.Context, c client.Client, namespace, name string) (Job, error) {
	job := v.Def.New()
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, job); err != nil {
		return nil, fmt.Errorf("reading %s %s/%s: %w", v.Def.Kind, namespace, name, err)
	}
	return job, nil
}

// Get implements view.Kind.
func (v View) Get(ctx context.Context, c client.Client, namespace, name string) (view.Shown, error) {
	job, err := v.get(ctx, c, namespace, name)
	if err != nil {
		return view.Shown{}, err
	}
	sel, err := v.podSelector(name)
	if err != nil {
		return view.Shown{}, err
	}
	pods, err := view.Pods(ctx, c, namespace, client.MatchingLabelsSelector{Selector: sel})
	if err != nil {
		return view.Shown{}, fmt.Errorf("listing the pods of %s %s/%s: %w", v.Def.Kind, namespace, name, err)
	}
	s := v.shown(job, pods)
	return view.Shown{Data: s, Count: 1, Print: func(w io.Writer, now time.Time) error { return printJob(w, s, now) }}, nil
}

// List implements view.Kind.
func (v View) List(ctx context.Context, c client.Client, namespace, runtime string) (view.Shown, error) {
	if runtime != "" {
		return view.Shown{}, view.Usagef("--runtime filters TrainJobs; %ss have no runtime", v.Def.Kind)
	}
	list := v.Def.NewList()
	if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return view.Shown{}, fmt.Errorf("listing %ss in namespace %s: %w", v.Def.Kind, namespace, err)
	}
	sel, err := v.podSelector()
	if err != nil {
		return view.Shown{}, err
	}
	pods, err := view.Pods(ctx, c, namespace, client.MatchingLabelsSelector{Selector: sel})
	if err != nil {
		return view.Shown{}, fmt.Errorf("listing %s pods in namespace %s: %w", v.Def.Kind, namespace, err)
	}
	byJob := map[string][]corev1.Pod{}
	for _, p := range pods {
		byJob[p.Labels[kubeflowv1.JobNameLabel]] = append(byJob[p.Labels[kubeflowv1.JobNameLabel]], p)
	}
	items := v.Def.Items(list)
	sort.SliceStable(items, func(i, j int) bool {
		a, b := items[i].GetCreationTimestamp(), items[j].GetCreationTimestamp()
		if !a.Equal(&b) {
			return a.Before(&b)
		}
		return items[i].GetName() < items[j].GetName()
	})
	jobs := make([]Shown, 0, len(items))
	for _, j := range items {
		jobs = append(jobs, v.shown(j, byJob[j.GetName()]))
	}
	return view.Shown{Data: jobs, Count: len(jobs), Print: func(w io.Writer, now time.Time) error { return printJobs(w, jobs, now) }}, nil
}

// Logs implements view.Kind: the log of every replica's main container, or
// of the one replica --step names (launcher-0, worker-1), each line prefixed
// with the replica; followed until the job has finished.
func (v View) Logs(ctx context.Context, c client.Client, namespace, name string, o view.LogOptions) (*view.Logs, error) {
	k := v.Def.Kind
	if o.NodeSet {
		return nil, view.Usagef("--node is a TrainJob's node; a %s's replicas are --step <type>-N (%s)", k, v.examples())
	}
	replica := o.Step
	if t, i, ok := strings.Cut(replica, "-"); replica != "" && (!ok || t == "" || !view.IsCount(i)) {
		return nil, view.Usagef("--step %q: a %s's replica is one of %s", replica, k, v.examples())
	}
	if _, err := v.get(ctx, c, namespace, name); err != nil {
		return nil, err
	}
	sel, err := v.podSelector(name)
	if err != nil {
		return nil, err
	}
	l := &view.Logs{
		Streamer: &logs.Streamer{Job: name, Kind: k, Selector: sel.String(), Container: v.Def.Container, ContainerOf: v.container,
			Name: func(p *corev1.Pod) (string, int, bool) {
				n, order, ok := v.replicaOf(p)
				return n, order, ok && (replica == "" || n == replica)
			}},
		Done: func(ctx context.Context) (bool, error) {
			job, err := v.get(ctx, c, namespace, name)
			if err != nil {
				return false, err
			}
			_, done := Ended(job.JobStatus())
			return done, nil
		},
		None: fmt.Sprintf("no replica of %s %s has started yet (trainyard logs -f waits for them)", k, name),
	}
	if replica != "" {
		l.None = fmt.Sprintf("replica %s of %s %s has not started yet (trainyard logs -f waits for it; trainyard get %s/%s lists the replicas)",
			replica, k, name, v.Def.Name, name)
	}
	return l, nil
}

func (v View) examples() string {
	var out []string
	for _, t := range v.Def.Roles {
		out = append(out, LowerType(t)+"-0")
	}
	return strings.Join(out, ", ")
}

type progress struct {
	status, reason, message string
	active, replicas        int32
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

// Wait implements view.Kind: a job is waited for by its v1 conditions, by
// default until it Succeeded.
func (v View) Wait() view.Wait {
	return view.Wait{
		Statuses: Statuses,
		Done:     string(kubeflowv1.JobSucceeded),
		Failed:   string(kubeflowv1.JobFailed),
		Look: func(ctx context.Context, c client.Client, namespace, name string) (view.State, error) {
			job := v.Def.New()
			if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, job); err != nil {
				return view.State{}, err
			}
			var p progress
			st := job.JobStatus()
			if c := Condition(st); c != nil {
				p.status, p.reason, p.message = string(c.Type), c.Reason, c.Message
			}
			for t, rs := range v.Def.Defaulted(job).ReplicaSpecs() {
				if rs != nil {
					p.replicas += ptr.Deref(rs.Replicas, 1)
				}
				if r := st.ReplicaStatuses[t]; r != nil {
					p.active += r.Active
				}
			}
			s := view.State{Key: p, Progress: p.String(), In: map[string]bool{}}
			for _, c := range st.Conditions {
				if c.Status == corev1.ConditionTrue {
					s.In[string(c.Type)] = true
				}
			}
			if c, done := Ended(st); done {
				s.Finished = &view.Finish{Status: string(c.Type), Reason: c.Reason, Message: c.Message}
			}
			return s, nil
		},
	}
}

// Complete implements view.Kind.
func (v View) Complete(ctx context.Context, c client.Client, namespace string) map[string]string {
	names := map[string]string{}
	list := v.Def.NewList()
	if err := c.List(ctx, list, client.InNamespace(namespace)); err == nil {
		for _, j := range v.Def.Items(list) {
			names[j.GetName()] = v.Def.Kind
		}
	}
	return names
}

// Help implements view.Kind.
func (v View) Help(command string) (string, string) {
	k, n := v.Def.Kind, v.Def.Name
	switch command {
	case "get":
		return fmt.Sprintf(`A %s (kubeflow.org/v1) is %s/NAME, or NAME with --kind %s: its STATUS is
the v1 condition it is in (Created, Running, Restarting, Suspended, Succeeded,
Failed), its steps are its replicas' pods (%s, ...). With --kind %s
and no NAME, lists the namespace's %ss.`, k, n, n, v.examples(), n, k), fmt.Sprintf("  trainyard get %s/NAME\n  trainyard get --kind %s", n, n)
	case "logs":
		return fmt.Sprintf(`A %s (%s/NAME): the log of every replica's main container, each line
prefixed with the replica as v1 named its pods; --step %s only that
replica. With -f, until the %s has Succeeded or Failed.`, k, n, LowerType(v.Def.Roles[0])+"-0", k),
			fmt.Sprintf("  trainyard logs %s/NAME --step %s", n, LowerType(v.Def.Roles[0])+"-0")
	case "wait":
		return fmt.Sprintf(`A %s (%s/NAME) is waited for by its v1 conditions: by default Succeeded
(exit 1 when it Failed); --for takes Created, Running, Restarting,
Suspended, Succeeded, Failed.`, k, n), fmt.Sprintf("  trainyard wait %s/NAME", n)
	case "delete":
		return "", fmt.Sprintf("  trainyard delete %s/NAME", n)
	}
	return "", ""
}
