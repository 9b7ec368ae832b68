package jobframework

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/childsync"
	"github.com/trainyard/trainyard/pkg/observe"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
)

func TestTTLRemaining(t *testing.T) {
	done := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cases := map[string]struct {
		ttl        *int32
		completion *metav1.Time
		now        time.Time
		want       time.Duration
	}{
		"no TTL":       {nil, &done, done.Add(time.Hour), 0},
		"not finished": {ptr.To[int32](60), nil, done.Time, 0},
		"time left":    {ptr.To[int32](60), &done, done.Add(20 * time.Second), 40 * time.Second},
		"due":          {ptr.To[int32](60), &done, done.Add(time.Minute), 0},
		"overdue":      {ptr.To[int32](0), &done, done.Add(time.Hour), 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, TTLRemaining(tc.ttl, tc.completion, tc.now)); diff != "" {
				t.Errorf("TTLRemaining (-want +got):\n%s", diff)
			}
		})
	}
}

// lifecycleAdapter is a fake kind (TrainJob objects) whose jobs finish when
// their phase says so, with the TrainJob's TTL and a fixed deadline.
type lifecycleAdapter struct {
	fakeAdapter
	deadline time.Time // zero: none
}

func (*lifecycleAdapter) Finished(o client.Object) (bool, *metav1.Time) {
	st := &o.(*trainer.TrainJob).Status
	return st.Phase == trainer.TrainJobCompletePhase || st.Phase == trainer.TrainJobFailedPhase, st.CompletionTime
}

func (*lifecycleAdapter) TTLAfterFinished(o client.Object) *int32 {
	return o.(*trainer.TrainJob).Spec.TTLSecondsAfterFinished
}

func (a *lifecycleAdapter) Deadline(client.Object, time.Time) (time.Time, bool) {
	return a.deadline, !a.deadline.IsZero()
}

// TestDecideLifecycle: the rules every kind shares, from what the kind says
// of its jobs: the deadline (fail, stop the JobSet, unless it finished
// first; look again when due), the TTL after finishing, and how soon an
// error that retrying cannot fix is looked at again.
func TestDecideLifecycle(t *testing.T) {
	done := metav1.NewTime(testNow.Add(-10 * time.Second))
	finishedJob := func(ttl *int32) *trainer.TrainJob {
		return trainJob(func(j *trainer.TrainJob) {
			j.Status.Phase, j.Status.CompletionTime, j.Spec.TTLSecondsAfterFinished = trainer.TrainJobCompletePhase, &done, ttl
		})
	}
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "job", UID: "js-uid"}}
	finishedJS := js.DeepCopy()
	finishedJS.Status.Conditions = []metav1.Condition{{Type: string(jobsetv1alpha2.JobSetCompleted), Status: metav1.ConditionTrue}}
	withJobSet := func(js *jobsetv1alpha2.JobSet) *observe.Observed {
		return &observe.Observed{Children: childsync.Children{{GroupKind: observe.JobSetKind, Name: js.Name}: js}}
	}
	// failOnDeadline is the kind's part: Failed when told the deadline
	// passed, Complete when its JobSet completed.
	failOnDeadline := func(job client.Object, obs *observe.Observed, s Sync, _ *opLog) Decision {
		j := job.DeepCopyObject().(*trainer.TrainJob)
		switch _, jobSetDone := observe.Finished(obs.JobSet(j.Name)); {
		case s.DeadlineExceeded:
			j.Status.Phase, j.Status.CompletionTime = trainer.TrainJobFailedPhase, &metav1.Time{Time: testNow}
		case jobSetDone && j.Status.CompletionTime == nil:
			j.Status.Phase, j.Status.CompletionTime = trainer.TrainJobCompletePhase, &metav1.Time{Time: testNow}
		}
		return Decision{Outcome: Outcome{Job: j}}
	}
	type want struct {
		Delete           []string
		Requeue          time.Duration
		DeadlineExceeded bool
	}
	cases := map[string]struct {
		job      *trainer.TrainJob
		obs      *observe.Observed
		deadline time.Duration // from now; 0: none
		err      error
		want     want
	}{
		"finished, no TTL: kept":                   {job: finishedJob(nil), want: want{}},
		"finished, TTL not due: look again then":   {job: finishedJob(ptr.To[int32](60)), want: want{Requeue: 50 * time.Second}},
		"finished, TTL due: the job is deleted":    {job: finishedJob(ptr.To[int32](10)), want: want{Delete: []string{"job"}}},
		"running with a deadline: look again then": {job: trainJob(), deadline: time.Minute, want: want{Requeue: time.Minute}},
		"past its deadline: failed, its JobSet deleted": {job: trainJob(), obs: withJobSet(js), deadline: -time.Second,
			want: want{Delete: []string{"job"}, DeadlineExceeded: true}},
		"past its deadline with a TTL: the final status first": {job: trainJob(func(j *trainer.TrainJob) { j.Spec.TTLSecondsAfterFinished = ptr.To[int32](0) }),
			deadline: -time.Second, want: want{Requeue: time.Millisecond, DeadlineExceeded: true}},
		"past its deadline, the JobSet finished first: not failed": {job: trainJob(), obs: withJobSet(finishedJS), deadline: -time.Second,
			want: want{}},
		"a lookup failed: look again soon": {job: trainJob(), err: &framework.InvalidError{Errs: field.ErrorList{field.Invalid(nil, "", "")}, Recheck: true},
			want: want{Requeue: LookupRecheck}},
		"a child name is taken: look again later": {job: trainJob(), err: childsync.ErrNotOwned, want: want{Requeue: NotOwnedRecheck}},
		"input to fix: wait for the fix":          {job: trainJob(), err: &framework.InvalidError{}, want: want{}},
		"transient: the queue's backoff":          {job: trainJob(), err: errors.New("boom"), want: want{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a := &lifecycleAdapter{fakeAdapter: fakeAdapter{status: failOnDeadline, log: &opLog{}}}
			if tc.deadline != 0 {
				a.deadline = testNow.Add(tc.deadline)
			}
			obs := tc.obs
			if obs == nil {
				obs = &observe.Observed{}
			}
			d := Decide(a, tc.job, obs, Sync{Err: tc.err}, testNow)
			got := want{Requeue: d.Requeue, DeadlineExceeded: a.gotSync.DeadlineExceeded}
			for _, o := range d.Delete {
				got.Delete = append(got.Delete, o.GetName())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPlanForEndedJobs: the plan step plans nothing for a finished job, nor
// one past its deadline; else it is the kind's.
func TestPlanForEndedJobs(t *testing.T) {
	done := metav1.NewTime(testNow)
	cases := map[string]struct {
		job      *trainer.TrainJob
		deadline time.Duration
		want     int
	}{
		"running":             {job: trainJob(), want: 1},
		"before its deadline": {job: trainJob(), deadline: time.Second, want: 1},
		"at its deadline":     {job: trainJob(), deadline: -time.Nanosecond, want: 0},
		"finished": {job: trainJob(func(j *trainer.TrainJob) {
			j.Status.Phase, j.Status.CompletionTime = trainer.TrainJobFailedPhase, &done
		}), want: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a := &lifecycleAdapter{}
			if tc.deadline != 0 {
				a.deadline = testNow.Add(tc.deadline)
			}
			if _, err := PlanFor(a, tc.job, &observe.Observed{}, testNow); err != nil {
				t.Fatal(err)
			}
			if a.planCalls != tc.want {
				t.Errorf("%d Plan calls, want %d", a.planCalls, tc.want)
			}
		})
	}
}
