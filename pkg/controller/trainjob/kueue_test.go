package trainjob

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/childsync"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
	"github.com/trainyard/trainyard/pkg/observe"
)

// TestStatusKueue: a job a queue holds back is Pending for the reason its
// Kueue Workload gives, not Suspended.
func TestStatusKueue(t *testing.T) {
	heldJS, runningJS := jobSet(t, true), jobSet(t, false)
	const (
		overCapacity = "couldn't assign flavors to pod set node: insufficient quota for nvidia.com/gpu in flavor default, request > maximum capacity (16 > 8)"
		noQuota      = "couldn't assign flavors to pod set node: insufficient unused quota for cpu in flavor default, 4 more needed"
		noQueue      = "LocalQueue q doesn't exist"
		preemptMsg   = "Preempted to accommodate a workload (UID: 1234) due to prioritization in the ClusterQueue"
		timeoutMsg   = "Exceeded the PodsReady timeout default/job"
	)
	// held is the status of a TrainJob Kueue keeps suspended.
	held := func(reason, msg string) trainer.TrainJobStatus {
		return trainer.TrainJobStatus{
			Conditions: []metav1.Condition{condSuspended},
			Phase:      trainer.TrainJobPending, Reason: reason, Message: msg,
			NumNodes: ptr.To[int32](2), ReadyNodes: ptr.To[int32](0),
		}
	}
	queuedInQ := held(ReasonWaitingForQuota, "queued in LocalQueue q")
	// heldJob is a TrainJob Kueue suspended, last seen with status s.
	heldJob := func(s trainer.TrainJobStatus) *trainer.TrainJob { return newJob(suspended(true), withStatus(s)) }
	warning := func(reason, msg string) []jobframework.Event {
		return []jobframework.Event{{Type: corev1.EventTypeWarning, Reason: reason, Action: "Queue", Message: msg}}
	}
	userSuspended := trainer.TrainJobStatus{
		Conditions: []metav1.Condition{condSuspended},
		Phase:      trainer.TrainJobSuspendedPhase, Reason: trainer.TrainJobSuspendedReason, Message: "TrainJob is suspended",
		NumNodes: ptr.To[int32](2), ReadyNodes: ptr.To[int32](0),
	}
	deactivated := workload("job-abc12", 0)
	deactivated.Spec.Active = ptr.To(false)
	deleting := workload("job-old", 0)
	deleting.DeletionTimestamp = at(time.Minute)
	deleting.Finalizers = []string{"kueue.x-k8s.io/resource-in-use"}
	finishedWL := workload("job-done", time.Minute, wlCond(kueue.WorkloadFinished, metav1.ConditionTrue, "Succeeded", "done"))
	preemptedRunning := running(5 * time.Minute)
	preempted := held(ReasonPreempted, "preempted in LocalQueue q: "+preemptMsg)
	preempted.ReadyNodes = ptr.To[int32](2) // the pods are still going
	// jsHeld is a job whose JobSet (not the TrainJob) the queue holds.
	jsHeld := func(reason, msg string) trainer.TrainJobStatus {
		s := waiting(0)
		s.Reason, s.Message = reason, msg
		return s
	}

	cases := map[string]statusCase{
		"no quota reserved yet": {
			job:  heldJob(queuedInQ),
			obs:  queued(heldJS, workload("job-abc12", 0)),
			want: outcome{Status: queuedInQ},
		},
		"first seen queued: Suspended condition and its event, phase Pending": {
			job:  newJob(suspended(true), withStatus(trainer.TrainJobStatus{Conditions: nil})),
			obs:  queued(heldJS, workload("job-abc12", 0)),
			want: outcome{Status: queuedInQ, Events: []jobframework.Event{evSuspended}},
		},
		"no JobSet yet": {
			job: newJob(suspended(true), withStatus(trainer.TrainJobStatus{Conditions: []metav1.Condition{condSuspended}})),
			obs: queued(nil, workload("job-abc12", 0)),
			want: outcome{Status: trainer.TrainJobStatus{
				Conditions: []metav1.Condition{condSuspended},
				Phase:      trainer.TrainJobPending, Reason: ReasonWaitingForQuota, Message: "queued in LocalQueue q",
			}},
		},
		"waiting for quota": {
			job:  heldJob(queuedInQ),
			obs:  queued(heldJS, workload("job-abc12", 0, wlCond(kueue.WorkloadQuotaReserved, metav1.ConditionFalse, "Pending", noQuota))),
			want: outcome{Status: held(ReasonWaitingForQuota, "waiting in LocalQueue q: "+noQuota)},
		},
		"more than the queue can ever give: its own reason and a warning": {
			job: heldJob(queuedInQ),
			obs: queued(heldJS, workload("job-abc12", 0, wlCond(kueue.WorkloadQuotaReserved, metav1.ConditionFalse, "Pending", overCapacity))),
			want: outcome{
				Status: held(ReasonExceedsQueueCapacity, "can never fit LocalQueue q as its quota stands: "+overCapacity),
				Events: warning(ReasonExceedsQueueCapacity, "can never fit LocalQueue q as its quota stands: "+overCapacity),
			},
		},
		"still more than the queue can give: no second warning": {
			job:  heldJob(held(ReasonExceedsQueueCapacity, "can never fit LocalQueue q as its quota stands: "+overCapacity)),
			obs:  queued(heldJS, workload("job-abc12", 0, wlCond(kueue.WorkloadQuotaReserved, metav1.ConditionFalse, "Pending", overCapacity))),
			want: outcome{Status: held(ReasonExceedsQueueCapacity, "can never fit LocalQueue q as its quota stands: "+overCapacity)},
		},
		"inadmissible": {
			job:  heldJob(queuedInQ),
			obs:  queued(heldJS, workload("job-abc12", 0, wlCond(kueue.WorkloadQuotaReserved, metav1.ConditionFalse, kueue.WorkloadInadmissible, noQueue))),
			want: outcome{Status: held(ReasonInadmissible, noQueue), Events: warning(ReasonInadmissible, noQueue)},
		},
		"quota reserved, not admitted: waiting for admission checks": {
			job:  heldJob(queuedInQ),
			obs:  queued(heldJS, workload("job-abc12", 0, wlCond(kueue.WorkloadQuotaReserved, metav1.ConditionTrue, "QuotaReserved", "reserved"))),
			want: outcome{Status: held(ReasonAdmissionChecks, "quota reserved in LocalQueue q; waiting for admission checks")},
		},
		"admitted, but the job is still suspended": {
			job: heldJob(queuedInQ),
			obs: queued(heldJS, workload("job-abc12", 0,
				wlCond(kueue.WorkloadQuotaReserved, metav1.ConditionTrue, "QuotaReserved", "reserved"),
				wlCond(kueue.WorkloadAdmitted, metav1.ConditionTrue, "Admitted", "admitted"))),
			want: outcome{Status: held(ReasonAdmitted, "admitted in LocalQueue q; waiting for Kueue to start it")},
		},
		"deactivated": {
			job:  heldJob(queuedInQ),
			obs:  queued(heldJS, deactivated),
			want: outcome{Status: held(ReasonDeactivated, "Kueue workload job-abc12 is deactivated")},
		},
		"preempted while running: Suspended, Preempted and their events": {
			job: newJob(suspended(true), withStatus(preemptedRunning)),
			obs: observedWithPods(queued(runningJS, workload("job-abc12", 0,
				wlCond(kueue.WorkloadEvicted, metav1.ConditionTrue, kueue.WorkloadEvictedByPreemption, preemptMsg))),
				readyPod(0), readyPod(1)),
			want: outcome{Status: preempted, Events: []jobframework.Event{
				evSuspended,
				{Type: corev1.EventTypeWarning, Reason: ReasonPreempted, Action: "Queue", Message: "preempted in LocalQueue q: " + preemptMsg},
			}},
		},
		"evicted for another reason": {
			job: heldJob(queuedInQ),
			obs: queued(heldJS, workload("job-abc12", 0,
				wlCond(kueue.WorkloadEvicted, metav1.ConditionTrue, "PodsReadyTimeout", timeoutMsg))),
			want: outcome{Status: held(ReasonEvicted, "evicted from LocalQueue q (PodsReadyTimeout): "+timeoutMsg)},
		},
		"an eviction that is over does not count": {
			job: heldJob(queuedInQ),
			obs: queued(heldJS, workload("job-abc12", 0,
				wlCond(kueue.WorkloadEvicted, metav1.ConditionFalse, "PodsReadyTimeout", timeoutMsg))),
			want: outcome{Status: queuedInQ},
		},
		"the newest Workload counts": {
			job: heldJob(queuedInQ),
			obs: queued(heldJS,
				workload("job-new", 2*time.Minute),
				workload("job-old", time.Minute, wlCond(kueue.WorkloadEvicted, metav1.ConditionTrue, "PodsReadyTimeout", timeoutMsg)),
			),
			want: outcome{Status: queuedInQ},
		},
		"finished and deleted Workloads are ignored": {
			job:  heldJob(queuedInQ),
			obs:  queued(heldJS, deleting, finishedWL),
			want: outcome{Status: userSuspended},
		},
		"no Workload: a suspended job is Suspended": {
			job:  heldJob(queuedInQ),
			obs:  queued(heldJS),
			want: outcome{Status: userSuspended},
		},
		"Kueue not served: Workloads are ignored": {
			job: heldJob(queuedInQ),
			obs: func() *observe.Observed {
				o := queued(heldJS, workload("job-abc12", 0))
				o.KueueServed = false
				return o
			}(),
			want: outcome{Status: userSuspended},
		},
		"the queue holds the JobSet, not the TrainJob": {
			job:  newJob(withStatus(waiting(0))),
			obs:  queued(heldJS, workload("job-abc12", 0)),
			want: outcome{Status: jsHeld(ReasonWaitingForQuota, "queued in LocalQueue q")},
		},
		"admitted, JobSet not yet resumed": {
			job: newJob(withStatus(jsHeld(ReasonWaitingForQuota, "queued in LocalQueue q"))),
			obs: queued(heldJS, workload("job-abc12", 0,
				wlCond(kueue.WorkloadAdmitted, metav1.ConditionTrue, "Admitted", "admitted"))),
			want: outcome{Status: jsHeld(ReasonAdmitted, "admitted in LocalQueue q; waiting for Kueue to start it")},
		},
		"admitted and started: the pods say the rest": {
			job: newJob(withStatus(jsHeld(ReasonAdmitted, "admitted in LocalQueue q; waiting for Kueue to start it"))),
			obs: observedWithPods(queued(runningJS, workload("job-abc12", 0,
				wlCond(kueue.WorkloadAdmitted, metav1.ConditionTrue, "Admitted", "admitted"))), readyPod(0)),
			want: outcome{Status: waiting(1)},
		},
		"admitted, no JobSet yet: waiting for it, not for the queue": {
			job: newJob(),
			obs: queued(nil, workload("job-abc12", 0,
				wlCond(kueue.WorkloadAdmitted, metav1.ConditionTrue, "Admitted", "admitted"))),
			want: outcome{Status: trainer.TrainJobStatus{Phase: trainer.TrainJobPending, Reason: "WaitingForJobSet", Message: "the JobSet is being created or resumed"}},
		},
	}
	runStatusCases(t, cases)
}

// observedWithPods adds pods to what was observed.
func observedWithPods(obs *observe.Observed, pods ...corev1.Pod) *observe.Observed {
	obs.Pods = append(obs.Pods, pods...)
	return obs
}

// TestStatusKueueStarting: while Kueue is between the update and the patch
// that start a TrainJob (suspended, with Kueue's podTemplateOverrides or
// runtime patch), a change of its status is deferred for at most
// KueueWriteGrace; what syncing did is still told.
func TestStatusKueueStarting(t *testing.T) {
	heldJS := jobSet(t, true)
	admitted := queued(heldJS, workload("job-abc12", 0,
		wlCond(kueue.WorkloadQuotaReserved, metav1.ConditionTrue, "QuotaReserved", "reserved"),
		wlCond(kueue.WorkloadAdmitted, metav1.ConditionTrue, "Admitted", "admitted")))
	admittedStatus := trainer.TrainJobStatus{
		Conditions: []metav1.Condition{condSuspended},
		Phase:      trainer.TrainJobPending, Reason: ReasonAdmitted, Message: "admitted in LocalQueue q; waiting for Kueue to start it",
		NumNodes: ptr.To[int32](2), ReadyNodes: ptr.To[int32](0),
	}
	// kueueUpdated is the job after Kueue's update: its generation went up
	// (so did the conditions' observedGeneration) and it has Kueue's marks.
	kueueOverride := func(j *trainer.TrainJob) {
		j.Generation = 2
		j.Spec.PodTemplateOverrides = append(j.Spec.PodTemplateOverrides, trainer.PodTemplateOverride{
			TargetJobs: []trainer.PodTemplateOverrideTargetJob{{Name: "node"}},
			Metadata:   &metav1.ObjectMeta{Labels: map[string]string{kueuePodSetLabel: "node"}},
		})
	}
	kueuePatch := func(j *trainer.TrainJob) {
		j.Generation = 2
		j.Spec.RuntimePatches = append(j.Spec.RuntimePatches, trainer.RuntimePatch{Manager: kueueManager})
	}
	userOverride := func(j *trainer.TrainJob) {
		j.Generation = 2
		j.Spec.PodTemplateOverrides = append(j.Spec.PodTemplateOverrides, trainer.PodTemplateOverride{
			TargetJobs: []trainer.PodTemplateOverrideTargetJob{{Name: "node"}},
			Metadata:   &metav1.ObjectMeta{Labels: map[string]string{"team": "a"}},
		})
	}
	updated := map[childsync.Key]childsync.Action{jsKey: childsync.Updated}
	evUpdated := jobframework.Event{Type: corev1.EventTypeNormal, Reason: EventJobSetUpdated, Action: "Update", Message: "Updated suspended JobSet job"}
	cases := map[string]struct {
		job        *trainer.TrainJob
		sync       jobframework.Sync
		wantDefer  bool
		wantEvents []jobframework.Event // sent now
	}{
		"Kueue's overrides synced to the JobSet, not resumed yet": {
			job: newJob(suspended(true), withStatus(admittedStatus), kueueOverride), sync: synced(admitted, nil, updated),
			wantDefer: true, wantEvents: []jobframework.Event{evUpdated},
		},
		"Kueue's runtime patch, not resumed yet": {
			job: newJob(suspended(true), withStatus(admittedStatus), kueuePatch), sync: synced(admitted, nil, nil),
			wantDefer: true,
		},
		"resumed by Kueue": {
			job: newJob(withStatus(admittedStatus), kueueOverride), sync: synced(admitted, nil, updated),
			wantEvents: []jobframework.Event{evUpdated, evResumed},
		},
		"the user's own override": {
			job: newJob(suspended(true), withStatus(admittedStatus), userOverride), sync: synced(admitted, nil, updated),
			wantEvents: []jobframework.Event{evUpdated},
		},
		"nothing changed": {
			job: newJob(suspended(true), withStatus(admittedStatus), kueueOverride, func(j *trainer.TrainJob) {
				j.Status.Conditions[0].ObservedGeneration = 2
			}),
			sync: synced(admitted, nil, nil),
		},
		"syncing failed": {
			job: newJob(suspended(true), withStatus(admittedStatus), kueueOverride), sync: failed(errors.New("boom")),
		},
	}
	a := newAdapter(t)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out := jobframework.Decide(a, tc.job, admitted, tc.sync, tNow)
			if out.Defer != tc.wantDefer {
				got := out.Job.(*trainer.TrainJob).Status
				t.Errorf("Defer = %v, want %v; status %s -> %s", out.Defer, tc.wantDefer, tc.job.Status.Reason, got.Reason)
			}
			if tc.wantDefer && out.DeferFor != KueueWriteGrace {
				t.Errorf("DeferFor = %v, want %v", out.DeferFor, KueueWriteGrace)
			}
			if diff := cmp.Diff(tc.wantEvents, sent(out), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("events sent now (-want +got):\n%s", diff)
			}
		})
	}
}
