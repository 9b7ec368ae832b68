package trainjob

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/childsync"
	"github.com/trainyard/trainyard/pkg/observe"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
	jobsetplugin "github.com/trainyard/trainyard/pkg/runtime/plugins/jobset"
)

// TestFollowJobSet: how the JobSet finished becomes Complete or Failed (once,
// reason and message verbatim), and its counts jobsStatus, through the JobSet
// plugin's facts.
func TestFollowJobSet(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Hour))
	spec := jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{
		{Name: "dataset-initializer"}, {Name: "model-initializer"}, {Name: "node"},
	}}
	cond := func(typ string, s metav1.ConditionStatus, reason, msg string, at metav1.Time) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg, LastTransitionTime: at}
	}
	rjs := func(name string, ready, succeeded, failed, active, suspended int32) jobsetv1alpha2.ReplicatedJobStatus {
		return jobsetv1alpha2.ReplicatedJobStatus{Name: name, Ready: ready, Succeeded: succeeded, Failed: failed, Active: active, Suspended: suspended}
	}
	js := func(name string, ready, succeeded, failed, active, suspended int32) trainer.JobStatus {
		return trainer.JobStatus{Name: name, Ready: ptr.To(ready), Succeeded: ptr.To(succeeded), Failed: ptr.To(failed), Active: ptr.To(active), Suspended: ptr.To(suspended)}
	}
	cases := map[string]struct {
		jobSet *jobsetv1alpha2.JobSet
		status trainer.TrainJobStatus
		want   trainer.TrainJobStatus
	}{
		"no JobSet leaves the status alone": {
			status: trainer.TrainJobStatus{
				Conditions: []metav1.Condition{cond("Created", metav1.ConditionFalse, "BuildFailed", "boom", t0)},
				JobsStatus: []trainer.JobStatus{js("node", 1, 0, 0, 1, 0)},
			},
			want: trainer.TrainJobStatus{
				Conditions: []metav1.Condition{cond("Created", metav1.ConditionFalse, "BuildFailed", "boom", t0)},
				JobsStatus: []trainer.JobStatus{js("node", 1, 0, 0, 1, 0)},
			},
		},
		"running JobSet: no terminal condition, counts copied": {
			jobSet: &jobsetv1alpha2.JobSet{Spec: spec, Status: jobsetv1alpha2.JobSetStatus{
				Conditions: []metav1.Condition{
					cond("StartupPolicyCompleted", metav1.ConditionTrue, "Started", "", t0),
					cond("Suspended", metav1.ConditionFalse, "ResumeJobs", "", t0),
				},
				ReplicatedJobsStatus: []jobsetv1alpha2.ReplicatedJobStatus{rjs("node", 1, 0, 0, 1, 0)},
			}},
			want: trainer.TrainJobStatus{JobsStatus: []trainer.JobStatus{js("node", 1, 0, 0, 1, 0)}},
		},
		"Completed becomes Complete with reason and message verbatim": {
			jobSet: &jobsetv1alpha2.JobSet{Spec: spec, Status: jobsetv1alpha2.JobSetStatus{
				Conditions: []metav1.Condition{
					cond("Completed", metav1.ConditionTrue, "AllJobsCompleted", "jobset completed successfully", t1),
				},
			}},
			status: trainer.TrainJobStatus{Conditions: []metav1.Condition{cond("Created", metav1.ConditionTrue, "JobSetCreated", "ok", t0)}},
			want: trainer.TrainJobStatus{Conditions: []metav1.Condition{
				cond("Created", metav1.ConditionTrue, "JobSetCreated", "ok", t0),
				cond("Complete", metav1.ConditionTrue, "AllJobsCompleted", "jobset completed successfully", t1),
			}},
		},
		"Failed becomes Failed with reason and message verbatim": {
			jobSet: &jobsetv1alpha2.JobSet{Spec: spec, Status: jobsetv1alpha2.JobSetStatus{
				Conditions: []metav1.Condition{
					cond("Failed", metav1.ConditionTrue, "FailedJobs", `jobset failed due to: job "x" failed: BackoffLimitExceeded`, t1),
				},
			}},
			want: trainer.TrainJobStatus{Conditions: []metav1.Condition{
				cond("Failed", metav1.ConditionTrue, "FailedJobs", `jobset failed due to: job "x" failed: BackoffLimitExceeded`, t1),
			}},
		},
		"a terminal condition that is not true is not copied": {
			jobSet: &jobsetv1alpha2.JobSet{Spec: spec, Status: jobsetv1alpha2.JobSetStatus{
				Conditions: []metav1.Condition{
					cond("Completed", metav1.ConditionFalse, "NotYet", "", t0),
					cond("Failed", metav1.ConditionUnknown, "Unknown", "", t0),
				},
			}},
			want: trainer.TrainJobStatus{},
		},
		"an existing terminal condition is not overwritten": {
			jobSet: &jobsetv1alpha2.JobSet{Spec: spec, Status: jobsetv1alpha2.JobSetStatus{
				Conditions: []metav1.Condition{
					cond("Failed", metav1.ConditionTrue, "FailedJobs", "later failure", t1),
				},
			}},
			status: trainer.TrainJobStatus{Conditions: []metav1.Condition{
				cond("Failed", metav1.ConditionTrue, "DeadlineExceeded", "first failure", t0),
			}},
			want: trainer.TrainJobStatus{Conditions: []metav1.Condition{
				cond("Failed", metav1.ConditionTrue, "DeadlineExceeded", "first failure", t0),
			}},
		},
		"an existing Complete stays as first observed": {
			jobSet: &jobsetv1alpha2.JobSet{Spec: spec, Status: jobsetv1alpha2.JobSetStatus{
				Conditions: []metav1.Condition{cond("Completed", metav1.ConditionTrue, "AllJobsCompleted", "new message", t1)},
			}},
			status: trainer.TrainJobStatus{Conditions: []metav1.Condition{cond("Complete", metav1.ConditionTrue, "AllJobsCompleted", "old message", t0)}},
			want:   trainer.TrainJobStatus{Conditions: []metav1.Condition{cond("Complete", metav1.ConditionTrue, "AllJobsCompleted", "old message", t0)}},
		},
		"a false condition of the same type is replaced in place": {
			jobSet: &jobsetv1alpha2.JobSet{Spec: spec, Status: jobsetv1alpha2.JobSetStatus{
				Conditions: []metav1.Condition{cond("Failed", metav1.ConditionTrue, "FailedJobs", "boom", t1)},
			}},
			status: trainer.TrainJobStatus{Conditions: []metav1.Condition{
				cond("Failed", metav1.ConditionFalse, "Old", "", t0),
				cond("Suspended", metav1.ConditionFalse, "Resumed", "resumed", t0),
			}},
			want: trainer.TrainJobStatus{Conditions: []metav1.Condition{
				cond("Failed", metav1.ConditionTrue, "FailedJobs", "boom", t1),
				cond("Suspended", metav1.ConditionFalse, "Resumed", "resumed", t0),
			}},
		},
		"jobsStatus follows the JobSet's replicated job order and replaces the old list": {
			jobSet: &jobsetv1alpha2.JobSet{Spec: spec, Status: jobsetv1alpha2.JobSetStatus{
				ReplicatedJobsStatus: []jobsetv1alpha2.ReplicatedJobStatus{
					rjs("node", 2, 0, 1, 2, 0),
					rjs("gone", 9, 9, 9, 9, 9),
					rjs("dataset-initializer", 0, 1, 0, 0, 0),
				},
			}},
			status: trainer.TrainJobStatus{JobsStatus: []trainer.JobStatus{js("stale", 1, 1, 1, 1, 1)}},
			want: trainer.TrainJobStatus{JobsStatus: []trainer.JobStatus{
				js("dataset-initializer", 0, 1, 0, 0, 0),
				js("node", 2, 0, 1, 2, 0),
			}},
		},
		"a JobSet with no status clears jobsStatus": {
			jobSet: &jobsetv1alpha2.JobSet{Spec: spec},
			status: trainer.TrainJobStatus{JobsStatus: []trainer.JobStatus{js("node", 1, 1, 1, 1, 1)}, Phase: trainer.TrainJobRunning},
			want:   trainer.TrainJobStatus{Phase: trainer.TrainJobRunning},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job"}}
			status := *tc.status.DeepCopy()
			var jsBefore *jobsetv1alpha2.JobSet
			if tc.jobSet != nil {
				jsBefore = tc.jobSet.DeepCopy()
			}
			obs := &observe.Observed{}
			var seen *jobsetv1alpha2.JobSet
			if tc.jobSet != nil {
				seen = tc.jobSet.DeepCopy()
				seen.Name = job.Name
				obs.Children = childsync.Children{{GroupKind: observe.JobSetKind, Name: job.Name}: seen}
			}
			var facts framework.Facts
			jobsetplugin.New().Status(job.Name, obs, &facts)
			followJobSet(&status, facts)
			if diff := cmp.Diff(tc.want, status); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if seen != nil {
				seen.Name = jsBefore.Name
			}
			if diff := cmp.Diff(jsBefore, seen); diff != "" {
				t.Errorf("Status changed the JobSet (-before +after):\n%s", diff)
			}
		})
	}
}
