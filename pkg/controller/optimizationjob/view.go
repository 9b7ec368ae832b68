package optimizationjob

// What the trainyard CLI shows of OptimizationJobs (view.Kind): get (the
// job, and a table of its trials with their parameters, state and
// objective), wait, delete and completion. A trial's logs are its TrainJob's
// (trainyard logs trainjob/<name>-trial-<i>).

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/cli/view"
)

// View is the OptimizationJob kind in the CLI.
type View struct{}

var _ view.Kind = View{}

// View implements view.Provider.
func (*Kind) View() view.Kind { return View{} }

// Kind implements view.Kind.
func (View) Kind() string { return trainer.OptimizationJobKind }

// Names implements view.Kind.
func (View) Names() []string { return []string{"optimizationjob", "optimizationjobs", "optjob"} }

// New implements view.Kind.
func (View) New() client.Object { return &trainer.OptimizationJob{} }

// Shown is an OptimizationJob and its trials' TrainJobs, as `get` shows them
// (-o yaml|json prints it).
type Shown struct {
	Job    *trainer.OptimizationJob `json:"optimizationJob"`
	Trials []Trial                  `json:"trials"`
}

// Trial is one row of the trials' table.
type Trial struct {
	Name       string                        `json:"name"`
	State      string                        `json:"state"`
	Objective  string                        `json:"objective,omitempty"`
	Parameters []trainer.ParameterAssignment `json:"parameters,omitempty"`
	Message    string                        `json:"message,omitempty"`
}

// Read reads an OptimizationJob and its trials (their TrainJobs, by label).
func Read(ctx context.Context, c client.Client, namespace, name string) (*Shown, error) {
	var job trainer.OptimizationJob
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &job); err != nil {
		return nil, err
	}
	var tjs trainer.TrainJobList
	if err := c.List(ctx, &tjs, client.InNamespace(namespace), client.MatchingLabels{trainer.OptimizationJobNameLabel: name}); err != nil {
		return nil, fmt.Errorf("listing the trials of OptimizationJob %s/%s: %w", namespace, name, err)
	}
	return &Shown{Job: &job, Trials: TrialsOf(&job, tjs.Items)}, nil
}

// TrialsOf are the rows of the job's trials: every trial its status
// records, in order, then any other TrainJob of its trials not recorded
// yet; the state and parameters from the TrainJob while it exists.
func TrialsOf(job *trainer.OptimizationJob, tjs []trainer.TrainJob) []Trial {
	byName := map[string]*trainer.TrainJob{}
	for i := range tjs {
		if metav1.IsControlledBy(&tjs[i], job) {
			byName[tjs[i].Name] = &tjs[i]
		}
	}
	metric := ""
	if len(job.Spec.Objectives) > 0 {
		metric = job.Spec.Objectives[0].Metric
	}
	var out []Trial
	seen := map[string]bool{}
	if job.Status != nil {
		for _, r := range job.Status.Trials {
			t := Trial{Name: r.Name, State: string(r.State), Objective: r.ObjectiveValue, Message: r.Message}
			if tj := byName[r.Name]; tj != nil {
				t.Parameters = ParametersOf(tj)
				if r.State == trainer.TrialRunning {
					t = liveTrial(tj, metric)
				}
			}
			seen[r.Name] = true
			out = append(out, t)
		}
	}
	var rest []Trial
	for name, tj := range byName {
		if !seen[name] {
			rest = append(rest, liveTrial(tj, metric))
		}
	}
	slices.SortFunc(rest, func(a, b Trial) int { return trialIndex(job.Name, a.Name) - trialIndex(job.Name, b.Name) })
	return append(out, rest...)
}

// liveTrial is a trial's row from its TrainJob: while it runs, the last
// value of the metric it reported so far.
func liveTrial(tj *trainer.TrainJob, metric string) Trial {
	r := recordOf(tj, metric)
	t := Trial{Name: tj.Name, State: string(r.State), Objective: r.ObjectiveValue, Message: r.Message, Parameters: ParametersOf(tj)}
	if r.State == trainer.TrialRunning {
		if v, _, err := Objective(tj, metric); err == nil {
			t.Objective = v + " (so far)"
		}
	}
	return t
}

// Get implements view.Kind.
func (View) Get(ctx context.Context, c client.Client, namespace, name string) (view.Shown, error) {
	s, err := Read(ctx, c, namespace, name)
	if err != nil {
		return view.Shown{}, err
	}
	return view.Shown{Data: s, Count: 1, Print: func(w io.Writer, now time.Time) error { return PrintJob(w, s, now) }}, nil
}

// List implements view.Kind.
func (View) List(ctx context.Context, c client.Client, namespace, runtime string) (view.Shown, error) {
	if runtime != "" {
		return view.Shown{}, view.Usagef("--runtime filters TrainJobs; an OptimizationJob's runtime is its trials' (spec.trainJobTemplate.spec.runtimeRef)")
	}
	var list trainer.OptimizationJobList
	if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return view.Shown{}, err
	}
	jobs := list.Items
	slices.SortFunc(jobs, func(a, b trainer.OptimizationJob) int {
		if d := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); d != 0 {
			return d
		}
		return strings.Compare(a.Name, b.Name)
	})
	return view.Shown{Data: jobs, Count: len(jobs), Print: func(w io.Writer, now time.Time) error { return PrintJobs(w, jobs, now) }}, nil
}

// StatusOf is the condition an OptimizationJob is in: Failed, Complete,
// Running or Created (the first True of them, in that order), or "".
func StatusOf(job *trainer.OptimizationJob) *metav1.Condition {
	if job.Status == nil {
		return nil
	}
	for _, t := range []string{trainer.OptimizationJobFailed, trainer.OptimizationJobComplete, trainer.OptimizationJobRunning, trainer.OptimizationJobCreated} {
		if c := apimeta.FindStatusCondition(job.Status.Conditions, t); c != nil && c.Status == metav1.ConditionTrue {
			return c
		}
	}
	if c := apimeta.FindStatusCondition(job.Status.Conditions, trainer.OptimizationJobCreated); c != nil {
		return c // Created=False: an error
	}
	return nil
}

// PrintJobs writes the namespace's OptimizationJobs, one a line.
func PrintJobs(w io.Writer, jobs []trainer.OptimizationJob, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTRIALS\tSTATUS\tBEST\tBEST TRIAL\tAGE")
	for i := range jobs {
		j := &jobs[i]
		status, done, bestV, bestT := "", int32(0), "", ""
		if c := StatusOf(j); c != nil {
			status = c.Type
		}
		if j.Status != nil {
			done, bestV, bestT = j.Status.TrialsFinished, j.Status.Result.ObjectiveValue, j.Status.Result.TrainJobName
		}
		fmt.Fprintf(tw, "%s\t%d/%d\t%s\t%s\t%s\t%s\n", j.Name, done, Default(&j.Spec).NumTrials, view.OrDash(status),
			view.OrDash(bestV), view.OrDash(bestT), view.Age(j.CreationTimestamp, now))
	}
	return tw.Flush()
}

// PrintJob writes one OptimizationJob and the table of its trials.
func PrintJob(w io.Writer, s *Shown, now time.Time) error {
	j := s.Job
	spec := Default(&j.Spec)
	var b strings.Builder
	fmt.Fprintf(&b, "Name:       %s\n", j.Name)
	fmt.Fprintf(&b, "Namespace:  %s\n", j.Namespace)
	fmt.Fprintf(&b, "Kind:       %s\n", trainer.OptimizationJobKind)
	if len(spec.Objectives) > 0 {
		fmt.Fprintf(&b, "Objective:  %s %s\n", spec.Objectives[0].Direction, spec.Objectives[0].Metric)
	}
	algo := "random"
	if spec.SearchAlgorithm.Grid != nil {
		algo = "grid"
	} else if spec.SearchAlgorithm.Random.Seed != nil {
		algo = fmt.Sprintf("random (seed %d)", *spec.SearchAlgorithm.Random.Seed)
	}
	fmt.Fprintf(&b, "Search:     %s, %d trials, %d at a time\n", algo, spec.NumTrials, spec.ParallelTrials)
	status := "-"
	if c := StatusOf(j); c != nil {
		status = c.Type + view.ReasonText(c.Reason, c.Message)
	}
	fmt.Fprintf(&b, "Status:     %s\n", status)
	if j.Status != nil && j.Status.Result.TrainJobName != "" {
		r := j.Status.Result
		fmt.Fprintf(&b, "Best:       %s, %s=%s (%s)\n", r.TrainJobName, spec.Objectives[0].Metric, r.ObjectiveValue, ParamsText(r.Parameters))
	}
	fmt.Fprintf(&b, "Age:        %s\n", view.Age(j.CreationTimestamp, now))
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	return PrintTrials(w, spec, s.Trials)
}

// PrintTrials writes the table of trials: name, state, objective and one
// column per parameter.
func PrintTrials(w io.Writer, spec *trainer.OptimizationJobSpec, trials []Trial) error {
	if len(trials) == 0 {
		_, err := io.WriteString(w, "Trials:     none yet\n")
		return err
	}
	metric := "OBJECTIVE"
	if len(spec.Objectives) > 0 {
		metric = strings.ToUpper(spec.Objectives[0].Metric)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := []string{"TRIAL", "STATE", metric}
	for _, p := range spec.Parameters {
		head = append(head, strings.ToUpper(p.Name))
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, t := range trials {
		row := []string{t.Name, t.State, view.OrDash(t.Objective)}
		values := map[string]string{}
		for _, p := range t.Parameters {
			values[p.Name] = p.Value
		}
		for _, p := range spec.Parameters {
			row = append(row, view.OrDash(values[p.Name]))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

// Logs implements view.Kind: an OptimizationJob has no pods of its own.
func (View) Logs(_ context.Context, _ client.Client, _, name string, _ view.LogOptions) (*view.Logs, error) {
	return nil, view.Usagef("an OptimizationJob's logs are its trials': trainyard logs trainjob/%s-trial-N (trainyard get optimizationjob/%s lists them)", name, name)
}

// progress is what `wait` reports: the status and the trial counts.
type progress struct {
	status                            string
	created, running, done, failed, n int32
	best                              string
}

func (p progress) String() string {
	s := view.OrDash(p.status)
	s += fmt.Sprintf(", %d/%d trials finished (%d running, %d failed)", p.done, p.n, p.running, p.failed)
	if p.best != "" {
		s += ", best " + p.best
	}
	return s
}

// Wait implements view.Kind: by default until Complete (exit 1 when Failed).
func (View) Wait() view.Wait {
	return view.Wait{
		Statuses: []string{trainer.OptimizationJobCreated, trainer.OptimizationJobRunning, trainer.OptimizationJobComplete, trainer.OptimizationJobFailed},
		Done:     trainer.OptimizationJobComplete,
		Failed:   trainer.OptimizationJobFailed,
		Look: func(ctx context.Context, c client.Client, namespace, name string) (view.State, error) {
			var job trainer.OptimizationJob
			if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &job); err != nil {
				return view.State{}, err
			}
			p := progress{n: Default(&job.Spec).NumTrials}
			s := view.State{In: map[string]bool{}}
			if c := StatusOf(&job); c != nil {
				p.status = c.Type
			}
			if st := job.Status; st != nil {
				p.created, p.running, p.done, p.failed = st.TrialsCreated, st.TrialsRunning, st.TrialsFinished, st.TrialsFailed
				if st.Result.TrainJobName != "" {
					p.best = st.Result.TrainJobName + " " + st.Result.ObjectiveValue
				}
				for _, c := range st.Conditions {
					if c.Status == metav1.ConditionTrue {
						s.In[c.Type] = true
					}
				}
				for _, t := range []string{trainer.OptimizationJobComplete, trainer.OptimizationJobFailed} {
					if c := apimeta.FindStatusCondition(st.Conditions, t); c != nil && c.Status == metav1.ConditionTrue {
						s.Finished = &view.Finish{Status: c.Type, Reason: c.Reason, Message: c.Message}
					}
				}
			}
			s.Key, s.Progress = p, p.String()
			return s, nil
		},
	}
}

// Complete implements view.Kind.
func (View) Complete(ctx context.Context, c client.Client, namespace string) map[string]string {
	names := map[string]string{}
	var list trainer.OptimizationJobList
	if err := c.List(ctx, &list, client.InNamespace(namespace)); err == nil {
		for _, j := range list.Items {
			names[j.Name] = trainer.OptimizationJobKind
		}
	}
	return names
}

// Help implements view.Kind.
func (View) Help(command string) (string, string) {
	switch command {
	case "get":
		return `An OptimizationJob (trainer.kubeflow.org/v1alpha1) is optimizationjob/NAME
(or optjob/NAME): its objective, search, status and best trial, then a table
of its trials (TrainJobs NAME-trial-0, ...) with their state, objective value
and parameters. With --kind optimizationjob and no NAME, lists the namespace's
OptimizationJobs.`, `  # An OptimizationJob and its trials
  trainyard get optimizationjob/tune-mnist`
	case "logs":
		return `An OptimizationJob has no logs of its own: its trials are TrainJobs,
trainyard logs trainjob/NAME-trial-N.`, `  # Trial 0's logs
  trainyard logs trainjob/tune-mnist-trial-0`
	case "wait":
		return `An OptimizationJob (optimizationjob/NAME) is waited for by its conditions: by
default Complete (exit 1 when Failed: every trial failed); --for takes
Created, Running, Complete, Failed. A line is printed whenever its status,
trial counts or best trial change.`, `  # An OptimizationJob, until every trial has finished
  trainyard wait optimizationjob/tune-mnist`
	case "delete":
		return "Deleting an OptimizationJob deletes its trials (their owner is the OptimizationJob).", `  # An OptimizationJob and its trials
  trainyard delete optimizationjob/tune-mnist`
	}
	return "", ""
}
