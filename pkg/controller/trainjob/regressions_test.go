package trainjob

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
)

// Conditions Trainyard sets are stamped with the pass's clock, not the wall
// clock, so a TTL counted from a failure Trainyard set is due on that clock.
func TestConditionTimesComeFromThePass(t *testing.T) {
	a := newAdapter(t)
	job := newJob(activeDeadline(300), ttlAfterFinished(0))
	out := jobframework.Decide(a, job, observed(nil), jobframework.Sync{}, tNow)
	c := meta.FindStatusCondition(out.Job.(*trainer.TrainJob).Status.Conditions, trainer.TrainJobFailed)
	if c == nil || !c.LastTransitionTime.Time.Equal(tNow) {
		t.Fatalf("Failed condition %+v, want one stamped %s", c, tNow)
	}
	next := out.Job.(*trainer.TrainJob)
	out = jobframework.Decide(a, next, observed(nil), jobframework.Sync{}, tNow.Add(time.Second))
	if len(out.Delete) != 1 || out.Delete[0].GetName() != testName {
		t.Errorf("ttlSecondsAfterFinished=0 one second after the failure: Delete %v, Requeue %v; want the job deleted", out.Delete, out.Requeue)
	}
}

// A condition message longer than the stored limit is not a change on every
// pass: its event (and error metric) is sent once.
func TestLongErrorMessageEventOnce(t *testing.T) {
	a := newAdapter(t)
	long := &framework.InvalidError{Errs: field.ErrorList{field.Invalid(field.NewPath("spec"), "", strings.Repeat("x", 5000))}}
	job := newJob()
	var events int
	for pass := range 3 {
		out := jobframework.Decide(a, job, observed(nil), jobframework.Sync{Err: long}, tNow.Add(time.Duration(pass)*time.Second))
		events += len(out.Events)
		job = out.Job.(*trainer.TrainJob)
	}
	if events != 1 {
		t.Errorf("%d events over 3 passes with the same long error, want 1", events)
	}
}

// A transient error writing a child of a job whose JobSet runs does not send
// the job back to Pending, nor repeat its JobSetCreated and Running events.
func TestTransientErrorKeepsRunningJob(t *testing.T) {
	a := newAdapter(t)
	js := jobSet(t, false)
	job := newJob(withStatus(running(5 * time.Minute)))
	obs := observed(js, readyPod(0), readyPod(1))
	out := jobframework.Decide(a, job, obs, jobframework.Sync{Planned: true, Err: errors.New("service unavailable")}, tNow)
	got := out.Job.(*trainer.TrainJob)
	if got.Status.Phase != trainer.TrainJobRunning || meta.FindStatusCondition(got.Status.Conditions, trainer.TrainJobCreated) != nil {
		t.Errorf("phase %s, conditions %+v; want Running and no Created condition", got.Status.Phase, got.Status.Conditions)
	}
	if out.Retry == nil || len(out.Events)+len(out.SyncEvents) != 0 {
		t.Errorf("Retry %v, events %+v %+v; want a retry and no event", out.Retry, out.SyncEvents, out.Events)
	}
}

// A JobSet that completed before the deadline, while status had not caught
// up, completes the job: the deadline does not fail it, nor delete the JobSet.
func TestJobSetDoneBeforeDeadline(t *testing.T) {
	a := newAdapter(t)
	js := jobSet(t, false, jsCondition("Completed", "AllJobsCompleted", "jobset completed successfully", tCreated.Add(4*time.Minute)))
	job := newJob(activeDeadline(300), withStatus(running(time.Minute)))
	out := jobframework.Decide(a, job, observed(js), jobframework.Sync{}, tNow)
	got := out.Job.(*trainer.TrainJob)
	if got.Status.Phase != trainer.TrainJobCompletePhase || len(out.Delete) != 0 {
		t.Errorf("phase %s, delete %v; want Complete and nothing deleted", got.Status.Phase, out.Delete)
	}
	if meta.FindStatusCondition(got.Status.Conditions, trainer.TrainJobFailed) != nil {
		t.Errorf("Failed set on a job whose JobSet completed: %+v", got.Status.Conditions)
	}
}

// A job ends once: a JobSet that completes after Trainyard failed the job
// (deadline) adds no Complete condition.
func TestOneTerminalCondition(t *testing.T) {
	a := newAdapter(t)
	failed := newJob(activeDeadline(60))
	out := jobframework.Decide(a, failed, observed(nil), jobframework.Sync{}, tNow)
	job := out.Job.(*trainer.TrainJob)
	js := jobSet(t, false, jsCondition("Completed", "AllJobsCompleted", "done", tNow))
	out = jobframework.Decide(a, job, observed(js), jobframework.Sync{}, tNow.Add(time.Second))
	var terminal []string
	for _, c := range out.Job.(*trainer.TrainJob).Status.Conditions {
		if c.Status == metav1.ConditionTrue && (c.Type == trainer.TrainJobComplete || c.Type == trainer.TrainJobFailed) {
			terminal = append(terminal, c.Type)
		}
	}
	if diff := cmp.Diff([]string{trainer.TrainJobFailed}, terminal); diff != "" {
		t.Errorf("terminal conditions (-want +got):\n%s", diff)
	}
}
