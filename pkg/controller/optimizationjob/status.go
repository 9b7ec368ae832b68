package optimizationjob

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
	"github.com/trainyard/trainyard/pkg/observe"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
)

// records are the job's trials, index by index, as observed now: the
// trials recorded in status and those observed, up to the highest index
// either knows (trials are made in index order, so every index below it
// was made). A finished record is final; a recorded trial whose TrainJob is
// gone before it finished, or an index below the highest whose TrainJob is
// missing, failed (it was deleted).
func records(job *trainer.OptimizationJob, obs *observe.Observed, total int) []trainer.TrialStatus {
	var old []trainer.TrialStatus
	if job.Status != nil {
		old = job.Status.Trials
	}
	oldByName := map[string]*trainer.TrialStatus{}
	for i := range old {
		oldByName[old[i].Name] = &old[i]
	}
	observed := observedTrials(obs)
	n := len(old)
	for name := range observed {
		if i := trialIndex(job.Name, name); i >= n && i < max(total, n) {
			n = i + 1
		}
	}
	metric := ""
	if len(job.Spec.Objectives) > 0 {
		metric = job.Spec.Objectives[0].Metric
	}
	out := make([]trainer.TrialStatus, 0, n)
	for i := range n {
		name := TrialName(job.Name, i)
		prev, tj := oldByName[name], observed[name]
		switch {
		case prev != nil && prev.State != trainer.TrialRunning:
			out = append(out, *prev)
		case tj != nil:
			out = append(out, recordOf(tj, metric))
		default:
			out = append(out, trainer.TrialStatus{Name: name, State: trainer.TrialFailed, Message: "TrainJob deleted before it finished"})
		}
	}
	return out
}

// recordOf is an observed trial's record.
func recordOf(tj *trainer.TrainJob, metric string) trainer.TrialStatus {
	state, msg := TrialState(tj)
	r := trainer.TrialStatus{Name: tj.Name, State: state, Message: msg}
	if state == trainer.TrialSucceeded {
		value, _, err := Objective(tj, metric)
		if err != nil {
			r.Message = truncate("succeeded but "+err.Error(), 1024)
		} else {
			r.ObjectiveValue = value
		}
	}
	return r
}

// counts of the trials.
type counts struct{ created, running, succeeded, failed int32 }

func countsOf(recs []trainer.TrialStatus) counts {
	c := counts{created: int32(len(recs))}
	for _, r := range recs {
		switch r.State {
		case trainer.TrialRunning:
			c.running++
		case trainer.TrialSucceeded:
			c.succeeded++
		case trainer.TrialFailed:
			c.failed++
		}
	}
	return c
}

func (c counts) String() string {
	return fmt.Sprintf("%d running, %d succeeded, %d failed", c.running, c.succeeded, c.failed)
}

// best is the index of the best succeeded trial with a numeric objective
// by direction, the lower index on a tie (-1: none).
func best(recs []trainer.TrialStatus, dir trainer.ObjectiveDirection) int {
	at, bestV := -1, 0.0
	for i, r := range recs {
		if r.State != trainer.TrialSucceeded || r.ObjectiveValue == "" {
			continue
		}
		v, err := strconv.ParseFloat(r.ObjectiveValue, 64)
		if err != nil {
			continue
		}
		if at < 0 || (dir == trainer.ObjectiveDirectionMaximize && v > bestV) || (dir != trainer.ObjectiveDirectionMaximize && v < bestV) {
			at, bestV = i, v
		}
	}
	return at
}

// Status implements jobframework.Adapter: the trials' records and counts,
// the best trial, the conditions, and an event per trial that finished and
// per change of the best trial. It reads only the job and what was observed
// (with the trials this pass created).
func (a Adapter) Status(o client.Object, obs *observe.Observed, sync jobframework.Sync, now time.Time) jobframework.Outcome {
	job := o.(*trainer.OptimizationJob)
	u := job.DeepCopy()
	if u.Status == nil {
		u.Status = &trainer.OptimizationJobStatus{}
	}
	st := u.Status
	if done, _ := a.Finished(job); done {
		return jobframework.Outcome{Job: u} // finished is final
	}
	t := metav1.NewTime(now)
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason,
			Message: truncate(msg, 32768), LastTransitionTime: t, ObservedGeneration: job.Generation})
	}
	var invalid *framework.InvalidError
	if errors.As(sync.Err, &invalid) {
		msg := "invalid spec: " + invalid.Error()
		set(trainer.OptimizationJobCreated, metav1.ConditionFalse, trainer.OptimizationJobInvalidSpecReason, msg)
		set(trainer.OptimizationJobFailed, metav1.ConditionTrue, trainer.OptimizationJobInvalidSpecReason, msg+" (the spec is immutable: create a new OptimizationJob)")
		return jobframework.Outcome{Job: u, Events: []jobframework.Event{{Type: corev1.EventTypeWarning, Reason: EventInvalid, Action: "Validate", Message: msg}}}
	}
	spec, s, errs := Prepare(job)
	if len(errs) > 0 { // planned nothing: cannot happen once Plan passed
		return jobframework.Outcome{Job: u}
	}
	total := s.Trials()
	recs := records(job, sync.After(obs), total)
	c := countsOf(recs)
	st.Trials = recs
	st.TrialsCreated, st.TrialsRunning, st.TrialsSucceeded, st.TrialsFailed = c.created, c.running, c.succeeded, c.failed
	st.TrialsFinished = c.succeeded + c.failed
	obj := spec.Objectives[0]
	var events []jobframework.Event
	events = append(events, trialEvents(job, recs, obj.Metric)...)

	oldBest := st.Result.TrainJobName
	if b := best(recs, obj.Direction); b >= 0 {
		st.Result = trainer.Result{TrainJobName: recs[b].Name, ObjectiveValue: recs[b].ObjectiveValue,
			Parameters: resultParameters(job, obs, recs[b].Name, b, s)}
		if recs[b].Name != oldBest {
			events = append(events, jobframework.Event{Type: corev1.EventTypeNormal, Reason: EventBestTrial, Action: "Evaluate",
				Message: fmt.Sprintf("Best trial is now %s: %s=%s (%s)", recs[b].Name, obj.Metric, recs[b].ObjectiveValue, ParamsText(st.Result.Parameters)),
				Related: trialRef(job.Namespace, recs[b].Name)})
		}
	}

	switch {
	case sync.Err != nil:
		set(trainer.OptimizationJobCreated, metav1.ConditionFalse, trainer.OptimizationJobCreateFailedReason, "creating trials: "+sync.Err.Error())
	case c.created > 0:
		set(trainer.OptimizationJobCreated, metav1.ConditionTrue, trainer.OptimizationJobTrialsCreatedReason,
			fmt.Sprintf("%d of %d trials created", c.created, total))
	}
	if int(c.created) < total || c.running > 0 {
		if c.created > 0 {
			set(trainer.OptimizationJobRunning, metav1.ConditionTrue, trainer.OptimizationJobTrialsRunningReason,
				fmt.Sprintf("%d of %d trials finished: %s", c.succeeded+c.failed, total, c))
		}
		return jobframework.Outcome{Job: u, Events: events}
	}
	msg := fmt.Sprintf("%d trials finished: %d succeeded, %d failed", total, c.succeeded, c.failed)
	set(trainer.OptimizationJobRunning, metav1.ConditionFalse, trainer.OptimizationJobTrialsFinishedReason, msg)
	if c.succeeded == 0 {
		set(trainer.OptimizationJobFailed, metav1.ConditionTrue, trainer.OptimizationJobAllTrialsFailedReason, msg)
		events = append(events, jobframework.Event{Type: corev1.EventTypeWarning, Reason: EventFailed, Action: "Finish", Message: "Every trial failed: " + msg})
		return jobframework.Outcome{Job: u, Events: events}
	}
	if st.Result.TrainJobName != "" {
		msg += fmt.Sprintf("; best trial %s: %s=%s", st.Result.TrainJobName, obj.Metric, st.Result.ObjectiveValue)
	} else {
		msg += fmt.Sprintf("; no trial reported a numeric %s", obj.Metric)
	}
	set(trainer.OptimizationJobComplete, metav1.ConditionTrue, trainer.OptimizationJobTrialsFinishedReason, msg)
	events = append(events, jobframework.Event{Type: corev1.EventTypeNormal, Reason: EventCompleted, Action: "Finish", Message: msg})
	return jobframework.Outcome{Job: u, Events: events}
}

// trialEvents are the events of trials that finished since the records in
// the job's status.
func trialEvents(job *trainer.OptimizationJob, recs []trainer.TrialStatus, metric string) []jobframework.Event {
	was := map[string]trainer.TrialState{}
	if job.Status != nil {
		for _, r := range job.Status.Trials {
			was[r.Name] = r.State
		}
	}
	var out []jobframework.Event
	for _, r := range recs {
		if r.State == trainer.TrialRunning || was[r.Name] == r.State {
			continue
		}
		if r.State == trainer.TrialSucceeded {
			msg := fmt.Sprintf("Trial %s succeeded: %s=%s", r.Name, metric, r.ObjectiveValue)
			if r.ObjectiveValue == "" {
				msg = fmt.Sprintf("Trial %s %s", r.Name, r.Message)
			}
			out = append(out, jobframework.Event{Type: corev1.EventTypeNormal, Reason: EventTrialSucceeded, Action: "Observe", Message: msg,
				Related: trialRef(job.Namespace, r.Name)})
			continue
		}
		out = append(out, jobframework.Event{Type: corev1.EventTypeWarning, Reason: EventTrialFailed, Action: "Observe",
			Message: fmt.Sprintf("Trial %s failed: %s", r.Name, r.Message), Related: trialRef(job.Namespace, r.Name)})
	}
	return out
}

// resultParameters are the best trial's parameters: as its TrainJob
// carries them, else as the status already says, else as the search makes
// them (the same, by construction).
func resultParameters(job *trainer.OptimizationJob, obs *observe.Observed, name string, i int, s interface {
	Trial(int) []trainer.ParameterAssignment
}) []trainer.ParameterAssignment {
	if tj := observedTrials(obs)[name]; tj != nil {
		if ps := ParametersOf(tj); ps != nil {
			return ps
		}
	}
	if job.Status != nil && job.Status.Result.TrainJobName == name && len(job.Status.Result.Parameters) > 0 {
		return job.Status.Result.Parameters
	}
	return s.Trial(i)
}

// sortEvents orders events by message (a map's order is random).
func sortEvents(evs []jobframework.Event) {
	slices.SortFunc(evs, func(a, b jobframework.Event) int {
		switch {
		case a.Message < b.Message:
			return -1
		case a.Message > b.Message:
			return 1
		}
		return 0
	})
}
