package trainjob

import (
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/childsync"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
	"github.com/trainyard/trainyard/pkg/observe"
)

// What a TrainJob adds to the framework's rules.
var (
	_ jobframework.Lifecycle   = (*Adapter)(nil)
	_ jobframework.CountsJudge = (*Adapter)(nil)
	_ jobframework.Deferrer    = (*Adapter)(nil)
	_ jobframework.Recorder    = (*Adapter)(nil)
)

// Finished implements jobframework.Lifecycle: Complete or Failed, and when.
func (*Adapter) Finished(o client.Object) (bool, *metav1.Time) {
	status := &o.(*trainer.TrainJob).Status
	return finished(status), status.CompletionTime
}

// TTLAfterFinished implements jobframework.Lifecycle.
func (*Adapter) TTLAfterFinished(o client.Object) *int32 {
	return o.(*trainer.TrainJob).Spec.TTLSecondsAfterFinished
}

// Deadline implements jobframework.Lifecycle: activeDeadlineSeconds from the
// job's creation or last resume (none while suspended).
func (*Adapter) Deadline(o client.Object, _ time.Time) (time.Time, bool) {
	job := o.(*trainer.TrainJob)
	return deadline(job, &job.Status)
}

// CountsOnly implements jobframework.CountsJudge: the JobSet's job counts and
// the message of an unchanged reason ("1/2 nodes running") may wait for the
// next transition; a change of anything kubectl get shows (State, Ready) or
// of a reason or condition (what clients wait for) may not wait as long.
func (*Adapter) CountsOnly(old, updated client.Object) bool {
	o, s := &old.(*trainer.TrainJob).Status, &updated.(*trainer.TrainJob).Status
	if o.Phase == "" || o.Reason != s.Reason || equality.Semantic.DeepEqual(o, s) {
		return false
	}
	c := *s
	c.JobsStatus, c.Message = o.JobsStatus, o.Message
	return equality.Semantic.DeepEqual(&c, o)
}

// DeferStatus implements jobframework.Deferrer: Kueue is between the two
// writes that start or stop the job, and a status write now would make the
// second one conflict. The second write brings the next pass; the bound, one
// that finds Kueue stuck.
func (*Adapter) DeferStatus(old, _ client.Object) time.Duration {
	if kueueStarting(old.(*trainer.TrainJob)) {
		return KueueWriteGrace
	}
	return 0
}

// RecordSync implements jobframework.Recorder: the time from the job's
// creation to its JobSet's.
func (a *Adapter) RecordSync(o client.Object, sync jobframework.Sync, now time.Time) {
	if sync.Err == nil && sync.Result.Action(observe.JobSetKind, o.GetName()) == childsync.Created {
		a.Metrics.TimeToJobSet(now.Sub(o.GetCreationTimestamp().Time).Seconds())
	}
}

// RecordStatus implements jobframework.Recorder: the phase entered, the time
// pending when the job starts running, and an error newly reported in
// Created=False.
func (a *Adapter) RecordStatus(o, u client.Object, now time.Time) {
	updated, ok := u.(*trainer.TrainJob)
	if !ok || updated == nil {
		return
	}
	job := o.(*trainer.TrainJob)
	old, status := &job.Status, &updated.Status
	if status.Phase != old.Phase {
		a.Metrics.Transition(string(status.Phase))
		if status.Phase == trainer.TrainJobRunning {
			a.Metrics.TimePending(now.Sub(pendingSince(job, status)).Seconds())
		}
	}
	if c := meta.FindStatusCondition(status.Conditions, trainer.TrainJobCreated); c != nil && c.Status == metav1.ConditionFalse {
		was := meta.FindStatusCondition(old.Conditions, trainer.TrainJobCreated)
		if was == nil || was.Status != c.Status || was.Reason != c.Reason || was.Message != c.Message {
			a.Metrics.Error(c.Reason)
		}
	}
}
