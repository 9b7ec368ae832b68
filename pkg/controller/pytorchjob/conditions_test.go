package pytorchjob

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
)

var (
	t0 = metav1.NewTime(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 = metav1.NewTime(t0.Add(time.Minute))
	t2 = metav1.NewTime(t0.Add(2 * time.Minute))
)

type condRow struct {
	Type   kubeflowv1.JobConditionType
	Status corev1.ConditionStatus
	Reason string
	Since  metav1.Time
}

func conds(st *kubeflowv1.JobStatus) []condRow {
	var out []condRow
	for _, c := range st.Conditions {
		out = append(out, condRow{c.Type, c.Status, c.Reason, c.LastTransitionTime})
	}
	return out
}

// v1's condition rules: Running and Restarting replace each other, the newest
// goes last (the State column), Succeeded/Failed turn Running False, and
// nothing changes after Failed.
func TestSetCondition(t *testing.T) {
	job := mnist(1)
	st := &kubeflowv1.JobStatus{}
	SetCreated(job, st, t0)
	SetCreated(job, st, t1) // only once
	SetCondition(st, kubeflowv1.JobRunning, corev1.ConditionTrue, ReasonRunning, "running", t0)
	if SetCondition(st, kubeflowv1.JobRunning, corev1.ConditionTrue, ReasonRunning, "other message", t1) {
		t.Errorf("same status and reason reported as a change")
	}
	SetCondition(st, kubeflowv1.JobRestarting, corev1.ConditionTrue, ReasonRestarting, "restarting", t1)
	want := []condRow{
		{kubeflowv1.JobCreated, corev1.ConditionTrue, ReasonCreated, t0},
		{kubeflowv1.JobRestarting, corev1.ConditionTrue, ReasonRestarting, t1},
	}
	if diff := cmp.Diff(want, conds(st)); diff != "" {
		t.Errorf("after Restarting (-want +got):\n%s", diff)
	}
	SetCondition(st, kubeflowv1.JobRunning, corev1.ConditionTrue, ReasonRunning, "running", t1)
	SetCondition(st, kubeflowv1.JobSucceeded, corev1.ConditionTrue, ReasonSucceeded, "done", t2)
	want = []condRow{
		{kubeflowv1.JobCreated, corev1.ConditionTrue, ReasonCreated, t0},
		{kubeflowv1.JobRunning, corev1.ConditionFalse, ReasonRunning, t2},
		{kubeflowv1.JobSucceeded, corev1.ConditionTrue, ReasonSucceeded, t2},
	}
	if diff := cmp.Diff(want, conds(st)); diff != "" {
		t.Errorf("after Succeeded (-want +got):\n%s", diff)
	}

	failed := &kubeflowv1.JobStatus{}
	SetCondition(failed, kubeflowv1.JobFailed, corev1.ConditionTrue, ReasonFailed, "failed", t0)
	if SetCondition(failed, kubeflowv1.JobRunning, corev1.ConditionTrue, ReasonRunning, "running", t1) {
		t.Errorf("a condition changed after Failed")
	}

	// A reason change keeps the transition time of the same status.
	s := &kubeflowv1.JobStatus{}
	SetCondition(s, kubeflowv1.JobSuspended, corev1.ConditionFalse, "A", "", t0)
	SetCondition(s, kubeflowv1.JobSuspended, corev1.ConditionFalse, "B", "", t1)
	if got := s.Conditions[0].LastTransitionTime; !got.Equal(&t0) {
		t.Errorf("lastTransitionTime %v, want %v", got, t0)
	}
}

func rolePod(rtype, phase string, deleting bool) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{kubeflowv1.ReplicaTypeLabel: rtype}},
		Status:     corev1.PodStatus{Phase: corev1.PodPhase(phase)},
	}
	if deleting {
		p.DeletionTimestamp = &t0
	}
	return p
}

func TestReplicaStatuses(t *testing.T) {
	job := Defaulted(mnist(4))
	got := ReplicaStatuses(job, []corev1.Pod{
		rolePod("master", "Running", false),
		rolePod("worker", "Running", false), rolePod("worker", "Running", true), rolePod("worker", "Pending", false),
		rolePod("worker", "Succeeded", false), rolePod("worker", "Failed", false), rolePod("other", "Running", false),
	})
	want := map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaStatus{
		"Master": {Active: 1, Selector: "training.kubeflow.org/job-name=mnist,training.kubeflow.org/operator-name=pytorchjob-controller,training.kubeflow.org/replica-type=master"},
		"Worker": {Active: 1, Succeeded: 1, Failed: 2, Selector: "training.kubeflow.org/job-name=mnist,training.kubeflow.org/operator-name=pytorchjob-controller,training.kubeflow.org/replica-type=worker"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ReplicaStatuses (-want +got):\n%s", diff)
	}
}

func TestUpdateRunning(t *testing.T) {
	rs := func(active, succeeded, failed int32) *kubeflowv1.ReplicaStatus {
		return &kubeflowv1.ReplicaStatus{Active: active, Succeeded: succeeded, Failed: failed}
	}
	cases := map[string]struct {
		job        *kubeflowv1.PyTorchJob
		master     *kubeflowv1.ReplicaStatus
		worker     *kubeflowv1.ReplicaStatus
		want       []condRow
		restarting bool
	}{
		"nothing runs yet": {job: mnist(2), master: rs(0, 0, 0), worker: rs(2, 0, 0)},
		"running once the master runs": {job: mnist(2), master: rs(1, 0, 0), worker: rs(0, 0, 0),
			want: []condRow{{kubeflowv1.JobRunning, corev1.ConditionTrue, ReasonRunning, t0}}},
		"a failed worker that restarts": {job: mnist(2), master: rs(1, 0, 0), worker: rs(1, 0, 1),
			want: []condRow{{kubeflowv1.JobRestarting, corev1.ConditionTrue, ReasonRestarting, t0}}, restarting: true},
		"a failed worker under Never does not restart (the JobSet fails the job)": {
			job: mnist(2, func(j *kubeflowv1.PyTorchJob) {
				j.Spec.PyTorchReplicaSpecs["Worker"].RestartPolicy = kubeflowv1.RestartPolicyNever
			}),
			master: rs(1, 0, 0), worker: rs(1, 0, 1),
			want: []condRow{{kubeflowv1.JobRunning, corev1.ConditionTrue, ReasonRunning, t0}}},
		"without a master: running once a worker runs": {
			job: mnist(2, func(j *kubeflowv1.PyTorchJob) { delete(j.Spec.PyTorchReplicaSpecs, "Master") }), worker: rs(1, 0, 0),
			want: []condRow{{kubeflowv1.JobRunning, corev1.ConditionTrue, ReasonRunning, t0}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := Defaulted(tc.job)
			st := &kubeflowv1.JobStatus{ReplicaStatuses: map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaStatus{"Worker": tc.worker}}
			if tc.master != nil {
				st.ReplicaStatuses["Master"] = tc.master
			}
			events := UpdateRunning(job, st, t0)
			if diff := cmp.Diff(tc.want, conds(st)); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if got := len(events) > 0; got != tc.restarting {
				t.Errorf("restarting event: %v, want %v", got, tc.restarting)
			}
		})
	}
}

func TestTerminal(t *testing.T) {
	finished := func(condType jobsetv1alpha2.JobSetConditionType, failedJobs ...string) *jobsetv1alpha2.JobSet {
		js := &jobsetv1alpha2.JobSet{Status: jobsetv1alpha2.JobSetStatus{Conditions: []metav1.Condition{
			{Type: string(condType), Status: metav1.ConditionTrue, Message: "jobset says so"}}}}
		for _, name := range failedJobs {
			js.Status.ReplicatedJobsStatus = append(js.Status.ReplicatedJobsStatus, jobsetv1alpha2.ReplicatedJobStatus{Name: name, Failed: 1})
		}
		return js
	}
	statusWith := func(workerFailed int32) *kubeflowv1.JobStatus {
		return &kubeflowv1.JobStatus{ReplicaStatuses: map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaStatus{"Worker": {Failed: workerFailed}}}
	}
	never := func(j *kubeflowv1.PyTorchJob) {
		j.Spec.PyTorchReplicaSpecs["Worker"].RestartPolicy = kubeflowv1.RestartPolicyNever
	}
	cases := map[string]struct {
		job      *kubeflowv1.PyTorchJob
		js       *jobsetv1alpha2.JobSet
		status   *kubeflowv1.JobStatus
		wantType kubeflowv1.JobConditionType
		wantMsg  string
	}{
		"running":                      {job: mnist(1), js: &jobsetv1alpha2.JobSet{}},
		"master succeeded":             {job: mnist(1), js: finished(jobsetv1alpha2.JobSetCompleted), wantType: kubeflowv1.JobSucceeded, wantMsg: "PyTorchJob mnist is successfully completed."},
		"workers succeeded, no master": {job: elastic(2), js: finished(jobsetv1alpha2.JobSetCompleted), wantType: kubeflowv1.JobSucceeded, wantMsg: "PyTorchJob ns/mnist successfully completed."},
		"worker pods failed (Never)": {job: mnist(3, never), js: finished(jobsetv1alpha2.JobSetFailed, "worker-2"), status: statusWith(2),
			wantType: kubeflowv1.JobFailed, wantMsg: "PyTorchJob mnist is failed because 2 Worker replica(s) failed."},
		"restarts past the backoff limit (OnFailure)": {job: mnist(1), js: finished(jobsetv1alpha2.JobSetFailed, "worker-0"), status: statusWith(0),
			wantType: kubeflowv1.JobFailed, wantMsg: "Job mnist has failed because it has reached the specified backoff limit"},
		"failed for another reason": {job: mnist(1), js: finished(jobsetv1alpha2.JobSetFailed), status: statusWith(0),
			wantType: kubeflowv1.JobFailed, wantMsg: "PyTorchJob mnist is failed: jobset says so"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st := tc.status
			if st == nil {
				st = &kubeflowv1.JobStatus{}
			}
			gotType, _, gotMsg, ok := Terminal(Defaulted(tc.job), tc.js, st)
			if ok != (tc.wantType != "") || gotType != tc.wantType || gotMsg != tc.wantMsg {
				t.Errorf("Terminal = %q %q %v, want %q %q", gotType, gotMsg, ok, tc.wantType, tc.wantMsg)
			}
		})
	}
}
