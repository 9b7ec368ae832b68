package trainjob

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/childsync"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
	"github.com/trainyard/trainyard/pkg/observe"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
)

// TestStatusSync: what planning and syncing the JobSet did: its events, and
// no Created condition on the healthy path (upstream has none).
func TestStatusSync(t *testing.T) {
	js := jobSet(t, false)
	suspendedJS := jobSet(t, true)
	suspendedStatus := trainer.TrainJobStatus{
		Conditions: []metav1.Condition{condSuspended},
		Phase:      trainer.TrainJobSuspendedPhase, Reason: trainer.TrainJobSuspendedReason, Message: "TrainJob is suspended",
		NumNodes: ptr.To[int32](2), ReadyNodes: ptr.To[int32](0),
	}
	cases := map[string]statusCase{
		// The pass that creates the JobSet sends its event and leaves its
		// status to the pass the JobSet's creation event brings.
		"the pass that creates the JobSet defers its status": {
			job:  newJob(),
			sync: synced(observed(nil), js, map[childsync.Key]childsync.Action{jsKey: childsync.Created}),
			want: outcome{Status: waiting(0), Events: []jobframework.Event{evCreated}, DeferStatus: true},
		},
		// The Suspended event comes with the status, from the next pass:
		// sent now too, it would be sent twice.
		"the pass that creates a suspended job's JobSet sends JobSetCreated only": {
			job:  newJob(suspended(true)),
			sync: synced(observed(nil), suspendedJS, map[childsync.Key]childsync.Action{jsKey: childsync.Created}),
			want: outcome{Status: suspendedStatus, Events: []jobframework.Event{evCreated}, DeferStatus: true},
		},
		"the next pass writes the suspended job's status and sends Suspended": {
			job:  newJob(suspended(true)),
			obs:  observed(suspendedJS),
			sync: synced(observed(suspendedJS), nil, nil),
			want: outcome{Status: suspendedStatus, Events: []jobframework.Event{evSuspended}},
		},
		"the next pass sees the JobSet: no Created condition, no second event": {
			job:  newJob(),
			obs:  observed(js),
			sync: synced(observed(js), nil, nil),
			want: outcome{Status: waiting(0)},
		},
		"a status from an earlier version loses its Created=True": {
			job: newJob(withStatus(trainer.TrainJobStatus{Conditions: []metav1.Condition{cond(trainer.TrainJobCreated, metav1.ConditionTrue,
				trainer.TrainJobCreatedReason, "JobSet job runs this TrainJob")}})),
			obs:  observed(js),
			sync: synced(observed(js), nil, nil),
			want: outcome{Status: waiting(0)},
		},
		"a later pass sends no second JobSetCreated": {
			job:  newJob(withStatus(waiting(0))),
			obs:  observed(js),
			sync: synced(observed(js), nil, nil),
			want: outcome{Status: waiting(0)},
		},
		"no sync result: the children are as observed": {
			job:  newJob(withStatus(waiting(0))),
			obs:  observed(js),
			sync: jobframework.Sync{Planned: true},
			want: outcome{Status: waiting(0)},
		},
		"a JobSet recreated with its new template": {
			job:  newJob(suspended(true), withStatus(suspendedStatus)),
			obs:  observed(suspendedJS),
			sync: synced(observed(suspendedJS), suspendedJS, map[childsync.Key]childsync.Action{jsKey: childsync.Recreated}),
			want: outcome{Status: suspendedStatus, Events: []jobframework.Event{{Type: corev1.EventTypeNormal,
				Reason: EventJobSetRecreated, Action: "Create", Message: "Recreated suspended JobSet job: its immutable template changed"}}},
		},
		"a suspended JobSet updated": {
			job:  newJob(suspended(true), withStatus(suspendedStatus)),
			obs:  observed(suspendedJS),
			sync: synced(observed(suspendedJS), suspendedJS, map[childsync.Key]childsync.Action{jsKey: childsync.Updated}),
			want: outcome{Status: suspendedStatus, Events: []jobframework.Event{{Type: corev1.EventTypeNormal,
				Reason: EventJobSetUpdated, Action: "Update", Message: "Updated suspended JobSet job"}}},
		},
		"a JobSet created again under a job that had one: its event": {
			job:  newJob(withStatus(waiting(0))),
			sync: synced(observed(nil), js, map[childsync.Key]childsync.Action{jsKey: childsync.Created}),
			want: outcome{Status: waiting(0), Events: []jobframework.Event{evCreated}, DeferStatus: true},
		},
	}
	runStatusCases(t, cases)
}

// TestStatusErrors: errors of planning and syncing, on a job that has no
// JobSet yet. Errors the user must fix go to Created=False (TrainingRuntimeNotSupported
// fails the job) with an event, once; API errors are retried.
func TestStatusErrors(t *testing.T) {
	errUnsupported := fmt.Errorf("%w: unsupported runtime MPIJob.trainer.kubeflow.org", runtime.ErrUnsupported)
	errNotFound := fmt.Errorf(`%w: ClusterTrainingRuntime "torch-distributed" does not exist; create it, or fix spec.runtimeRef`, runtime.ErrNotFound)
	errInvalid := &framework.InvalidError{Errs: field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), "1job", "must start with a lowercase letter")}}
	errLookup := &framework.InvalidError{Recheck: true, Errs: field.ErrorList{field.Invalid(field.NewPath("spec", "templateSpec", "priorityClassName"), "later", `PriorityClass "later" doesn't exist`)}}
	errNotOwned := fmt.Errorf("%w: JobSet default/job already exists and is not controlled by TrainJob job", childsync.ErrNotOwned)
	errNotServed := fmt.Errorf("%w: TrainJob job needs PodGroup.scheduling.x-k8s.io", childsync.ErrKindNotServed)
	errAPI := fmt.Errorf("creating JobSet job: %w", apierrors.NewServiceUnavailable("etcd is down"))
	errExists := fmt.Errorf("creating JobSet job: %w", apierrors.NewAlreadyExists(schema.GroupResource{Group: "jobset.x-k8s.io", Resource: "jobsets"}, "job"))
	errConflict := fmt.Errorf("applying JobSet job: %w", apierrors.NewConflict(schema.GroupResource{Group: "jobset.x-k8s.io", Resource: "jobsets"}, "job", errors.New("the object has been modified")))

	// createdFalse is the status of a job whose JobSet could not be made.
	createdFalse := func(reason string, err error) trainer.TrainJobStatus {
		return trainer.TrainJobStatus{
			Conditions: []metav1.Condition{cond(trainer.TrainJobCreated, metav1.ConditionFalse, reason, err.Error())},
			Phase:      trainer.TrainJobPending, Reason: reason, Message: err.Error(),
		}
	}
	warning := func(reason, action string, err error) []jobframework.Event {
		return []jobframework.Event{{Type: corev1.EventTypeWarning, Reason: reason, Action: action, Message: err.Error()}}
	}
	waitingForJobSet := trainer.TrainJobStatus{Phase: trainer.TrainJobPending, Reason: "WaitingForJobSet", Message: "the JobSet is being created or resumed"}
	unsupported := trainer.TrainJobStatus{
		Conditions: []metav1.Condition{cond(trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobRuntimeNotSupportedReason, errUnsupported.Error())},
		Phase:      trainer.TrainJobFailedPhase, Reason: trainer.TrainJobRuntimeNotSupportedReason, Message: errUnsupported.Error(),
		CompletionTime: passTime,
	}

	cases := map[string]statusCase{
		"unsupported runtime fails the job": {
			job:  newJob(),
			sync: failed(errUnsupported),
			want: outcome{Status: unsupported, Events: warning(EventRuntimeNotSupport, "Fail", errUnsupported)},
		},
		"runtime not found": {
			job:  newJob(),
			sync: failed(errNotFound),
			want: outcome{Status: createdFalse(trainer.TrainJobRuntimeNotFound, errNotFound), Events: warning(EventRuntimeNotFound, "Resolve", errNotFound)},
		},
		"runtime still not found: no second event": {
			job:  newJob(withStatus(createdFalse(trainer.TrainJobRuntimeNotFound, errNotFound))),
			sync: failed(errNotFound),
			want: outcome{Status: createdFalse(trainer.TrainJobRuntimeNotFound, errNotFound)},
		},
		"a lookup failed (missing PriorityClass): reported, and looked at again": {
			job:  newJob(),
			sync: failed(errLookup),
			want: outcome{Status: createdFalse(trainer.TrainJobBuildFailedReason, errLookup), Events: warning(EventBuildFailed, "Build", errLookup), Requeue: jobframework.LookupRecheck},
		},
		"invalid TrainJob": {
			job:  newJob(),
			sync: failed(errInvalid),
			want: outcome{Status: createdFalse(trainer.TrainJobBuildFailedReason, errInvalid), Events: warning(EventBuildFailed, "Build", errInvalid)},
		},
		"invalid TrainJob, wrapped": {
			job:  newJob(),
			sync: failed(fmt.Errorf("building: %w", errInvalid)),
			want: outcome{Status: createdFalse(trainer.TrainJobBuildFailedReason, fmt.Errorf("building: %w", errInvalid)),
				Events: warning(EventBuildFailed, "Build", fmt.Errorf("building: %w", errInvalid))},
		},
		"still invalid: no second event": {
			job:  newJob(withStatus(createdFalse(trainer.TrainJobBuildFailedReason, errInvalid))),
			sync: failed(errInvalid),
			want: outcome{Status: createdFalse(trainer.TrainJobBuildFailedReason, errInvalid)},
		},
		"another invalid input: a new event": {
			job:  newJob(withStatus(createdFalse(trainer.TrainJobBuildFailedReason, errors.New("an earlier problem")))),
			sync: failed(errInvalid),
			want: outcome{Status: createdFalse(trainer.TrainJobBuildFailedReason, errInvalid), Events: warning(EventBuildFailed, "Build", errInvalid)},
		},
		"a JobSet of that name not owned by the job": {
			job:  newJob(),
			sync: failed(errNotOwned),
			want: outcome{Status: createdFalse(trainer.TrainJobJobSetNotOwnedReason, errNotOwned), Events: warning(EventJobSetNotOwned, "Sync", errNotOwned), Requeue: jobframework.NotOwnedRecheck},
		},
		"a child kind the cluster does not serve": {
			job:  newJob(),
			sync: failed(errNotServed),
			want: outcome{Status: createdFalse(trainer.TrainJobChildKindNotServedReason, errNotServed), Events: warning(EventKindNotServed, "Apply", errNotServed), Requeue: jobframework.NotOwnedRecheck},
		},
		"a transient API error is reported and retried": {
			job:  newJob(),
			sync: failed(errAPI),
			want: outcome{Status: createdFalse(trainer.TrainJobApplyFailedReason, errAPI), Events: warning(EventApplyFailed, "Apply", errAPI), Retry: errAPI.Error()},
		},
		"the same transient error again: retried, no second event": {
			job:  newJob(withStatus(createdFalse(trainer.TrainJobApplyFailedReason, errAPI))),
			sync: failed(errAPI),
			want: outcome{Status: createdFalse(trainer.TrainJobApplyFailedReason, errAPI), Retry: errAPI.Error()},
		},
		"AlreadyExists is only retried": {
			job:  newJob(),
			sync: failed(errExists),
			want: outcome{Status: waitingForJobSet, Retry: errExists.Error()},
		},
		"Conflict is only retried": {
			job:  newJob(),
			sync: failed(errConflict),
			want: outcome{Status: waitingForJobSet, Retry: errConflict.Error()},
		},
		"the runtime appears: the error goes, the JobSet is created with its event": {
			job:  newJob(withStatus(createdFalse(trainer.TrainJobRuntimeNotFound, errNotFound))),
			sync: synced(observed(nil), jobSet(t, false), map[childsync.Key]childsync.Action{jsKey: childsync.Created}),
			want: outcome{Status: waiting(0), Events: []jobframework.Event{evCreated}, DeferStatus: true},
		},
		"the runtime appeared: the next pass has no error condition left": {
			job:  newJob(withStatus(createdFalse(trainer.TrainJobRuntimeNotFound, errNotFound))),
			obs:  observed(jobSet(t, false)),
			sync: synced(observed(jobSet(t, false)), nil, nil),
			want: outcome{Status: waiting(0)},
		},
	}
	runStatusCases(t, cases)
}

// TestStatusSuspension: spec.suspend sets Suspended=True (phase Suspended);
// a resume sets it False (Resumed); each change has its event, once.
func TestStatusSuspension(t *testing.T) {
	suspendedJS, runningJS := jobSet(t, true), jobSet(t, false)
	suspendedStatus := trainer.TrainJobStatus{
		Conditions: []metav1.Condition{condSuspended},
		Phase:      trainer.TrainJobSuspendedPhase, Reason: trainer.TrainJobSuspendedReason, Message: "TrainJob is suspended",
		NumNodes: ptr.To[int32](2), ReadyNodes: ptr.To[int32](0),
	}
	resumed := waiting(0)
	resumed.Conditions = []metav1.Condition{condResumed}
	suspendedWhileRunning := suspendedStatus
	suspendedWhileRunning.ReadyNodes = ptr.To[int32](2) // its pods are still there

	cases := map[string]statusCase{
		"a job created suspended": {
			job:  newJob(suspended(true)),
			obs:  observed(suspendedJS),
			sync: synced(observed(suspendedJS), nil, nil),
			want: outcome{Status: suspendedStatus, Events: []jobframework.Event{evSuspended}},
		},
		"still suspended: no second event": {
			job:  newJob(suspended(true), withStatus(suspendedStatus)),
			obs:  observed(suspendedJS),
			sync: synced(observed(suspendedJS), nil, nil),
			want: outcome{Status: suspendedStatus},
		},
		"a running job suspended": {
			job:  newJob(suspended(true), withStatus(running(5*time.Minute))),
			obs:  observed(runningJS, readyPod(0), readyPod(1)),
			sync: synced(observed(runningJS), nil, map[childsync.Key]childsync.Action{jsKey: childsync.Suspended}),
			want: outcome{Status: suspendedWhileRunning, Events: []jobframework.Event{evSuspended}},
		},
		"resumed": {
			job:  newJob(withStatus(suspendedStatus)),
			obs:  observed(suspendedJS),
			sync: synced(observed(suspendedJS), runningJS, map[childsync.Key]childsync.Action{jsKey: childsync.Resumed}),
			want: outcome{Status: resumed, Events: []jobframework.Event{evResumed}},
		},
		"resumed before: no second event": {
			job:  newJob(withStatus(resumed)),
			obs:  observed(runningJS),
			sync: synced(observed(runningJS), nil, nil),
			want: outcome{Status: resumed},
		},
		"suspended again after a resume": {
			job:  newJob(suspended(true), withStatus(resumed)),
			obs:  observed(suspendedJS),
			sync: synced(observed(suspendedJS), nil, nil),
			want: outcome{Status: suspendedStatus, Events: []jobframework.Event{evSuspended}},
		},
	}
	runStatusCases(t, cases)
}

// TestStatusPods: while its JobSet runs, a job's phase follows its trainer pods.
func TestStatusPods(t *testing.T) {
	js := jobSet(t, false)
	pullErr := pod("job-node-0-1-abcde", corev1.PodPending, false, func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "node", State: corev1.ContainerState{
			Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "pytorch:nope"`}}}}
	})
	unschedulable := pod("job-node-0-0-abcde", corev1.PodPending, false, func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: "Unschedulable", Message: "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."}}
	})
	starting := pod("job-node-0-1-abcde", corev1.PodRunning, false)
	deleting := readyPod(1)
	deleting.DeletionTimestamp = at(9 * time.Minute)
	otherJobSet := readyPod(1)
	otherJobSet.Labels[jobsetv1alpha2.JobSetUIDKey] = "an-older-jobset"
	allReadyJS := jobSet(t, false, jsReplicated(jobsetv1alpha2.ReplicatedJobStatus{Name: "node", Ready: 1, Active: 1}))

	pending := func(ready int32, reason, msg string) trainer.TrainJobStatus {
		s := waiting(ready)
		s.Reason, s.Message = reason, msg
		return s
	}
	evRunning := func(msg string) []jobframework.Event {
		return []jobframework.Event{{Type: corev1.EventTypeNormal, Reason: EventRunning, Action: "Run", Message: msg}}
	}
	started := running(10 * time.Minute) // StartTime: tNow
	oneFinished := running(5 * time.Minute)
	oneFinished.ReadyNodes, oneFinished.Message = ptr.To[int32](1), "1/2 nodes running, 1 finished"
	allFinished := running(5 * time.Minute)
	allFinished.ReadyNodes, allFinished.Message = ptr.To[int32](0), "0/2 nodes running, 2 finished"
	lagging := running(10 * time.Minute)
	lagging.JobsStatus = []trainer.JobStatus{{Name: "node", Ready: ptr.To[int32](1), Succeeded: ptr.To[int32](0),
		Failed: ptr.To[int32](0), Active: ptr.To[int32](1), Suspended: ptr.To[int32](0)}}
	restarting := waiting(1)
	restarting.StartTime = at(5 * time.Minute)

	cases := map[string]statusCase{
		"no pods yet": {
			job:  newJob(withStatus(waiting(0))),
			obs:  observed(js),
			want: outcome{Status: waiting(0)},
		},
		"one of two nodes ready": {
			job:  newJob(withStatus(waiting(0))),
			obs:  observed(js, readyPod(0), starting),
			want: outcome{Status: waiting(1)},
		},
		"a running pod not yet reporting readiness": {
			job:  newJob(withStatus(waiting(0))),
			obs:  observed(js, readyPod(0), pod("job-node-0-1-abcde", corev1.PodRunning, false, func(p *corev1.Pod) { p.Status.Conditions = nil })),
			want: outcome{Status: waiting(1)},
		},
		"an image pull problem": {
			job: newJob(withStatus(waiting(0))),
			obs: observed(js, readyPod(0), pullErr),
			want: outcome{Status: pending(1, "ImagePullBackOff",
				`pod job-node-0-1-abcde: container node: ImagePullBackOff: Back-off pulling image "pytorch:nope"`)},
		},
		"unschedulable": {
			job: newJob(withStatus(waiting(0))),
			obs: observed(js, unschedulable, pullErr),
			want: outcome{Status: pending(0, "Unschedulable",
				"pod job-node-0-0-abcde: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu.")},
		},
		"all nodes ready: Running, its event and start time": {
			job:  newJob(withStatus(waiting(1))),
			obs:  observed(js, readyPod(0), readyPod(1)),
			want: outcome{Status: started, Events: evRunning("2/2 nodes running")},
		},
		"already running: no second event": {
			job:  newJob(withStatus(running(5 * time.Minute))),
			obs:  observed(js, readyPod(0), readyPod(1)),
			want: outcome{Status: running(5 * time.Minute)},
		},
		"one node finished while the other runs: still Running": {
			job:  newJob(withStatus(running(5 * time.Minute))),
			obs:  observed(js, donePod(0), readyPod(1)),
			want: outcome{Status: oneFinished},
		},
		"every node finished before the JobSet says so: still Running": {
			job:  newJob(withStatus(running(5 * time.Minute))),
			obs:  observed(js, donePod(0), donePod(1)),
			want: outcome{Status: allFinished},
		},
		"a running node restarts: Pending again, start time kept": {
			job:  newJob(withStatus(running(5 * time.Minute))),
			obs:  observed(js, readyPod(0), starting),
			want: outcome{Status: restarting},
		},
		"the JobSet saw every node ready while the pod cache lags": {
			job:  newJob(withStatus(waiting(1))),
			obs:  observed(allReadyJS, readyPod(0)),
			want: outcome{Status: lagging, Events: evRunning("2/2 nodes running")},
		},
		"pods being deleted and pods of another JobSet do not count": {
			job:  newJob(withStatus(waiting(1))),
			obs:  observed(js, readyPod(0), deleting, otherJobSet),
			want: outcome{Status: waiting(1)},
		},
	}
	runStatusCases(t, cases)
}

// jsDone is the JobSet of the test job, finished with the condition given.
func jsDone(t *testing.T, typ jobsetv1alpha2.JobSetConditionType, reason, msg string, ltt time.Time) *jobsetv1alpha2.JobSet {
	return jobSet(t, false,
		jsCondition(typ, reason, msg, ltt),
		jsReplicated(jobsetv1alpha2.ReplicatedJobStatus{Name: "node", Succeeded: 1}, jobsetv1alpha2.ReplicatedJobStatus{Name: "unknown", Failed: 1}))
}

// TestStatusJobSetFinished: the JobSet's terminal conditions make the job
// Complete or Failed, with the JobSet's reason and message verbatim.
func TestStatusJobSetFinished(t *testing.T) {
	const doneMsg, failMsg = "jobset completed successfully", `jobset failed due to failed job "job-node-0"`
	completedAt := tCreated.Add(9 * time.Minute)
	complete := jsDone(t, jobsetv1alpha2.JobSetCompleted, "AllJobsCompleted", doneMsg, completedAt)
	failedJS := jsDone(t, jobsetv1alpha2.JobSetFailed, "FailedJobs", failMsg, completedAt)
	noTime := jsDone(t, jobsetv1alpha2.JobSetCompleted, "AllJobsCompleted", doneMsg, time.Time{})
	jobsStatus := []trainer.JobStatus{{Name: "node", Ready: ptr.To[int32](0), Succeeded: ptr.To[int32](1),
		Failed: ptr.To[int32](0), Active: ptr.To[int32](0), Suspended: ptr.To[int32](0)}}

	// terminal is what a job that ran since 2m looks like once its JobSet
	// finished (conditions copied from the JobSet carry no observedGeneration).
	terminal := func(typ string, phase trainer.TrainJobPhase, reason, msg string, completion *metav1.Time) trainer.TrainJobStatus {
		s := running(2 * time.Minute)
		s.Conditions = append(s.Conditions, metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: reason, Message: msg})
		s.Phase, s.Reason, s.Message = phase, reason, msg
		s.ReadyNodes = ptr.To[int32](0)
		s.CompletionTime = completion
		s.JobsStatus = jobsStatus
		return s
	}
	completeStatus := terminal(trainer.TrainJobComplete, trainer.TrainJobCompletePhase, "AllJobsCompleted", doneMsg, at(9*time.Minute))
	evCompleted := []jobframework.Event{{Type: corev1.EventTypeNormal, Reason: EventCompleted, Action: "Complete", Message: "TrainJob completed: " + doneMsg}}

	cases := map[string]statusCase{
		"JobSet completed": {
			job:  newJob(withStatus(running(2 * time.Minute))),
			obs:  observed(complete, donePod(0), donePod(1)),
			want: outcome{Status: completeStatus, Events: evCompleted},
		},
		"JobSet failed": {
			job: newJob(withStatus(running(2 * time.Minute))),
			obs: observed(failedJS, readyPod(0)),
			want: outcome{Status: terminal(trainer.TrainJobFailed, trainer.TrainJobFailedPhase, "FailedJobs", failMsg, at(9*time.Minute)),
				Events: []jobframework.Event{{Type: corev1.EventTypeWarning, Reason: EventFailed, Action: "Fail",
					Message: "TrainJob failed (FailedJobs): " + failMsg}}},
		},
		"a JobSet condition without transition time: completed now": {
			job:  newJob(withStatus(running(2 * time.Minute))),
			obs:  observed(noTime),
			want: outcome{Status: terminal(trainer.TrainJobComplete, trainer.TrainJobCompletePhase, "AllJobsCompleted", doneMsg, at(10*time.Minute)), Events: evCompleted},
		},
		"completed with a TTL: look again when it is due": {
			job:  newJob(ttlAfterFinished(3600), withStatus(running(2*time.Minute))),
			obs:  observed(complete),
			want: outcome{Status: completeStatus, Events: evCompleted, Requeue: 59 * time.Minute},
		},
		"completed with a TTL already due: look again at once": {
			job:  newJob(ttlAfterFinished(30), withStatus(running(2*time.Minute))),
			obs:  observed(complete),
			want: outcome{Status: completeStatus, Events: evCompleted, Requeue: time.Millisecond},
		},
		"completed with a deadline: no deadline requeue": {
			job:  newJob(activeDeadline(3600), withStatus(running(2*time.Minute))),
			obs:  observed(complete),
			want: outcome{Status: completeStatus, Events: evCompleted},
		},
	}
	runStatusCases(t, cases)

	// The transition time of the condition is the JobSet's.
	a := newAdapter(t)
	out := a.Status(newJob(withStatus(running(2*time.Minute))), observed(complete), jobframework.Sync{Planned: true}, tNow)
	c := FindCondition(out.Job.(*trainer.TrainJob), trainer.TrainJobComplete)
	if c == nil || !c.LastTransitionTime.Time.Equal(completedAt) {
		t.Errorf("Complete condition = %+v, want one with lastTransitionTime %v", c, completedAt)
	}
}

// TestStatusFinished: a finished job gets no new events and is deleted once
// its TTL has passed.
func TestStatusFinished(t *testing.T) {
	const doneMsg = "jobset completed successfully"
	complete := jsDone(t, jobsetv1alpha2.JobSetCompleted, "AllJobsCompleted", doneMsg, tCreated.Add(9*time.Minute))
	done := running(2 * time.Minute)
	done.Conditions = append(done.Conditions, metav1.Condition{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue,
		Reason: "AllJobsCompleted", Message: doneMsg, LastTransitionTime: metav1.NewTime(tCreated.Add(9 * time.Minute))})
	done.Phase, done.Reason, done.Message = trainer.TrainJobCompletePhase, "AllJobsCompleted", doneMsg
	done.ReadyNodes = ptr.To[int32](0)
	done.CompletionTime = at(9 * time.Minute)
	done.JobsStatus = []trainer.JobStatus{{Name: "node", Ready: ptr.To[int32](0), Succeeded: ptr.To[int32](1),
		Failed: ptr.To[int32](0), Active: ptr.To[int32](0), Suspended: ptr.To[int32](0)}}
	// An older version wrote no completion time.
	noCompletion := *done.DeepCopy()
	noCompletion.CompletionTime = nil

	cases := map[string]statusCase{
		"no TTL: nothing to do": {
			job:  newJob(withStatus(done)),
			obs:  observed(complete, readyPod(0)),
			want: outcome{Status: done},
		},
		"no events, whatever its pods do": {
			job:  newJob(suspended(true), withStatus(done)),
			obs:  observed(complete, readyPod(0), readyPod(1)),
			want: outcome{Status: done},
		},
		// As upstream, a missing JobSet changes nothing once the job is
		// finished (no status write when the namespace goes).
		"the JobSet is gone: the status stays": {
			job:  newJob(withStatus(done)),
			want: outcome{Status: done},
		},
		"completion time filled in from the condition": {
			job:  newJob(withStatus(noCompletion)),
			obs:  observed(complete),
			want: outcome{Status: done},
		},
		"TTL not yet due: look again then": {
			job:  newJob(ttlAfterFinished(3600), withStatus(done)),
			obs:  observed(complete),
			want: outcome{Status: done, Requeue: 59 * time.Minute},
		},
		"TTL due: the job is deleted": {
			job:  newJob(ttlAfterFinished(60), withStatus(done)),
			obs:  observed(complete),
			want: outcome{Status: done, Delete: []string{"TrainJob/job"}},
		},
		"TTL 0: deleted at once": {
			job:  newJob(ttlAfterFinished(0), withStatus(done)),
			obs:  observed(complete),
			want: outcome{Status: done, Delete: []string{"TrainJob/job"}},
		},
	}
	runStatusCases(t, cases)
}

// TestStatusDeadline: past activeDeadlineSeconds a job fails and its JobSet
// goes; before, the job is looked at again when it is due.
func TestStatusDeadline(t *testing.T) {
	js := jobSet(t, false)
	exceeded := trainer.TrainJobStatus{
		Conditions: []metav1.Condition{cond(trainer.TrainJobFailed, metav1.ConditionTrue,
			trainer.TrainJobDeadlineExceededReason, "TrainJob exceeded its active deadline")},
		Phase: trainer.TrainJobFailedPhase, Reason: trainer.TrainJobDeadlineExceededReason, Message: "TrainJob exceeded its active deadline",
		StartTime: at(5 * time.Minute), CompletionTime: passTime,
	}
	evExceeded := func(sec int) []jobframework.Event {
		return []jobframework.Event{{Type: corev1.EventTypeWarning, Reason: EventDeadlineExceeded, Action: "Fail",
			Message: fmt.Sprintf("TrainJob ran past activeDeadlineSeconds=%d", sec)}}
	}
	noStart := *exceeded.DeepCopy()
	noStart.StartTime = nil
	resumedWaiting := waiting(0)
	resumedWaiting.Conditions = append(resumedWaiting.Conditions, metav1.Condition{Type: trainer.TrainJobSuspended,
		Status: metav1.ConditionFalse, Reason: trainer.TrainJobResumedReason, Message: "TrainJob is resumed",
		ObservedGeneration: 1, LastTransitionTime: metav1.NewTime(tCreated.Add(5 * time.Minute))})
	suspendedStatus := trainer.TrainJobStatus{
		Conditions: []metav1.Condition{condSuspended},
		Phase:      trainer.TrainJobSuspendedPhase, Reason: trainer.TrainJobSuspendedReason, Message: "TrainJob is suspended",
		NumNodes: ptr.To[int32](2), ReadyNodes: ptr.To[int32](0),
	}

	cases := map[string]statusCase{
		"deadline passed: Failed, its event, the JobSet deleted": {
			job:  newJob(activeDeadline(300), withStatus(running(5*time.Minute))),
			obs:  observed(js, readyPod(0), readyPod(1)),
			want: outcome{Status: exceeded, Events: evExceeded(300), Delete: []string{"JobSet/job"}},
		},
		"deadline passed exactly now": {
			job:  newJob(activeDeadline(600), withStatus(running(5*time.Minute))),
			obs:  observed(js),
			want: outcome{Status: exceeded, Events: evExceeded(600), Delete: []string{"JobSet/job"}},
		},
		"deadline passed without a JobSet": {
			job: newJob(activeDeadline(300)),
			want: outcome{Status: trainer.TrainJobStatus{
				Conditions: []metav1.Condition{cond(trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobDeadlineExceededReason, "TrainJob exceeded its active deadline")},
				Phase:      trainer.TrainJobFailedPhase, Reason: trainer.TrainJobDeadlineExceededReason, Message: "TrainJob exceeded its active deadline",
				CompletionTime: passTime,
			}, Events: evExceeded(300)},
		},
		"deadline passed while waiting for pods": {
			job:  newJob(activeDeadline(300), withStatus(waiting(0))),
			obs:  observed(js),
			want: outcome{Status: noStart, Events: evExceeded(300), Delete: []string{"JobSet/job"}},
		},
		"deadline pending: look again then": {
			job:  newJob(activeDeadline(3600), withStatus(waiting(0))),
			obs:  observed(js),
			want: outcome{Status: waiting(0), Requeue: 50 * time.Minute},
		},
		"deadline counts from the last resume": {
			job:  newJob(activeDeadline(600), withStatus(resumedWaiting)),
			obs:  observed(js),
			want: outcome{Status: resumedWaiting, Requeue: 5 * time.Minute},
		},
		"a suspended job has no deadline": {
			job:  newJob(activeDeadline(60), suspended(true), withStatus(suspendedStatus)),
			obs:  observed(jobSet(t, true)),
			want: outcome{Status: suspendedStatus},
		},
	}
	runStatusCases(t, cases)
}

// TestStatusRecord: the pass's metrics record without panicking (several
// times, as a retried write may).
func TestStatusRecord(t *testing.T) {
	a := newAdapter(t)
	js := jobSet(t, false)
	type pass struct {
		job  *trainer.TrainJob
		obs  *observe.Observed
		sync jobframework.Sync
	}
	cases := map[string]pass{
		"JobSet created": {newJob(), observed(nil), synced(observed(nil), js, map[childsync.Key]childsync.Action{jsKey: childsync.Created})},
		"running after a resume": {newJob(withStatus(trainer.TrainJobStatus{Conditions: []metav1.Condition{{
			Type: trainer.TrainJobSuspended, Status: metav1.ConditionFalse, Reason: trainer.TrainJobResumedReason, Message: "TrainJob is resumed",
			ObservedGeneration: 1, LastTransitionTime: metav1.NewTime(tCreated.Add(time.Minute))}}})),
			observed(js, readyPod(0), readyPod(1)), synced(observed(js), nil, nil)},
		"an error":        {newJob(), observed(nil), failed(fmt.Errorf("%w: x", runtime.ErrNotFound))},
		"nothing changed": {newJob(withStatus(waiting(0))), observed(js), synced(observed(js), nil, nil)},
		"finished": {newJob(withStatus(trainer.TrainJobStatus{Conditions: []metav1.Condition{
			cond(trainer.TrainJobFailed, metav1.ConditionTrue, "FailedJobs", "x")}})), observed(nil), jobframework.Sync{}},
	}
	for name, tc := range cases {
		t.Run(name, func(*testing.T) {
			out := a.Status(tc.job, tc.obs, tc.sync, tNow)
			for range 2 {
				a.RecordSync(tc.job, tc.sync, tNow)
				a.RecordStatus(tc.job, out.Job, tNow)
			}
		})
	}
}

// TestStatusUnchangedOutcome: a pass over a job in a steady state changes
// nothing: the new status equals the old one.
func TestStatusUnchangedOutcome(t *testing.T) {
	a := newAdapter(t)
	js := jobSet(t, false)
	job := newJob(withStatus(running(5 * time.Minute)))
	out := a.Status(job, observed(js, readyPod(0), readyPod(1)), synced(observed(js), nil, nil), tNow)
	if diff := cmp.Diff(job, out.Job); diff != "" {
		t.Errorf("steady state changed the job (-old +new):\n%s", diff)
	}
	if len(out.Events) != 0 || out.Requeue != 0 || out.Delete != nil {
		t.Errorf("steady state outcome = %+v, want nothing to do", out)
	}
}

func TestTruncate(t *testing.T) {
	long := make([]byte, 5000)
	for k := range long {
		long[k] = 'x'
	}
	got := truncate(string(long))
	if len(got) != 4096 || got[4093:] != "..." {
		t.Errorf("truncate(5000 bytes) = %d bytes ending %q, want 4096 ending \"...\"", len(got), got[len(got)-3:])
	}
	if got := truncate("short"); got != "short" {
		t.Errorf("truncate(short) = %q", got)
	}
}

// TestStatusRestarts: the JobSet's restarts (its failure policy after lost
// pods) are counted in status.restarts, told once in an event, and never
// counted down.
func TestStatusRestarts(t *testing.T) {
	restarted := func(n int32) func(*jobsetv1alpha2.JobSet) {
		return func(js *jobsetv1alpha2.JobSet) {
			js.Status.Restarts = n
			js.Spec.FailurePolicy = &jobsetv1alpha2.FailurePolicy{MaxRestarts: 3}
		}
	}
	withRestarts := func(s trainer.TrainJobStatus, n int32) trainer.TrainJobStatus {
		s.Restarts = n
		return s
	}
	evRestarted := func(n int32) []jobframework.Event {
		return []jobframework.Event{{Type: corev1.EventTypeWarning, Reason: EventRestarted, Action: "Restart",
			Message: fmt.Sprintf("JobSet job restarted the job's pods (restart %d, at most 3)", n)}}
	}
	cases := map[string]statusCase{
		"first restart: counted and told": {
			job:  newJob(withStatus(waiting(0))),
			obs:  observed(jobSet(t, false, restarted(1))),
			want: outcome{Status: withRestarts(waiting(0), 1), Events: evRestarted(1)},
		},
		"the same restart again: no second event": {
			job:  newJob(withStatus(withRestarts(waiting(0), 1))),
			obs:  observed(jobSet(t, false, restarted(1))),
			want: outcome{Status: withRestarts(waiting(0), 1)},
		},
		"a second restart": {
			job:  newJob(withStatus(withRestarts(waiting(0), 1))),
			obs:  observed(jobSet(t, false, restarted(2))),
			want: outcome{Status: withRestarts(waiting(0), 2), Events: evRestarted(2)},
		},
		"a recreated JobSet starts from 0: the job's count stays": {
			job:  newJob(withStatus(withRestarts(waiting(0), 2))),
			obs:  observed(jobSet(t, false)),
			want: outcome{Status: withRestarts(waiting(0), 2)},
		},
	}
	runStatusCases(t, cases)
}

// TestStatusCountsOnly: which changes may wait for the next transition (the
// JobSet's job counts, the message that says them) and which may not (the
// first status, phase, ready nodes: what kubectl get shows; reason,
// conditions).
func TestStatusCountsOnly(t *testing.T) {
	js := jobSet(t, false)
	jsCounted := jobSet(t, false, jsReplicated(jobsetv1alpha2.ReplicatedJobStatus{Name: "node", Active: 1}))
	jsDoneCounted := jobSet(t, false, jsReplicated(jobsetv1alpha2.ReplicatedJobStatus{Name: "node", Succeeded: 1}),
		jsCondition(jobsetv1alpha2.JobSetCompleted, "AllJobsCompleted", "jobset completed successfully", tNow.Add(-time.Minute)))
	pullErr := pod("job-node-0-1-abcde", corev1.PodPending, false, func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "node", State: corev1.ContainerState{
			Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off"}}}}
	})
	started := running(5 * time.Minute)
	cases := map[string]struct {
		job  *trainer.TrainJob
		obs  *observe.Observed
		want bool
	}{
		"the first status":                    {job: newJob(), obs: observed(js)},
		"unchanged":                           {job: newJob(withStatus(waiting(0))), obs: observed(js)},
		"a node gets ready: the Ready column": {job: newJob(withStatus(waiting(0))), obs: observed(js, readyPod(0))},
		"the JobSet counts its job":           {job: newJob(withStatus(waiting(0))), obs: observed(jsCounted), want: true},
		"every node ready: Running":           {job: newJob(withStatus(waiting(1))), obs: observed(js, readyPod(0), readyPod(1))},
		"a node finishes while running":       {job: newJob(withStatus(started)), obs: observed(js, readyPod(0), donePod(1))},
		"a pod cannot pull its image":         {job: newJob(withStatus(waiting(0))), obs: observed(js, pullErr)},
		"the JobSet completes":                {job: newJob(withStatus(started)), obs: observed(jsDoneCounted)},
		"the JobSet is suspended: a reason":   {job: newJob(withStatus(waiting(1))), obs: observed(jobSet(t, true))},
	}
	a := newAdapter(t)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out := jobframework.Decide(a, tc.job, tc.obs, synced(tc.obs, nil, nil), tNow)
			if out.CountsOnly != tc.want {
				got := out.Job.(*trainer.TrainJob).Status
				t.Errorf("CountsOnly = %v, want %v; status %+v -> %+v", out.CountsOnly, tc.want, tc.job.Status, got)
			}
		})
	}
}
