package trainjob

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/childsync"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
	"github.com/trainyard/trainyard/pkg/observe"
	"github.com/trainyard/trainyard/pkg/plan"
	"github.com/trainyard/trainyard/pkg/runtime/plugins"
	rtt "github.com/trainyard/trainyard/test/util/rtt"
)

// Fixtures shared by the adapter's tests: one TrainJob "default/job" asking for
// two nodes of the torch-distributed runtime, created at tCreated and looked at
// (by default) ten minutes later.
const (
	testNS   = "default"
	testName = "job"
	jsUID    = "js-uid"
)

var (
	tCreated = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	tNow     = tCreated.Add(10 * time.Minute)

	// jsKey is the key of the job's JobSet among its children.
	jsKey = childsync.Key{GroupKind: observe.JobSetKind, Name: testName}

	// passTime is the pass's clock as the status records it: a condition
	// Trainyard sets is stamped with it, and the completion time of a job
	// Trainyard fails itself is that stamp.
	passTime = &metav1.Time{Time: tNow}
)

func at(d time.Duration) *metav1.Time { return &metav1.Time{Time: tCreated.Add(d)} }

func newAdapter(t testing.TB) *Adapter {
	t.Helper()
	fw, err := plugins.NewFramework()
	if err != nil {
		t.Fatal(err)
	}
	return &Adapter{Framework: fw}
}

// newJob is the test TrainJob (generation 1), changed by the mods in order.
func newJob(mods ...func(*trainer.TrainJob)) *trainer.TrainJob {
	job := rtt.MakeTrainJob(testNS, testName).NumNodes(2).Obj()
	job.UID = "job-uid"
	job.Generation = 1
	job.CreationTimestamp = metav1.NewTime(tCreated)
	for _, m := range mods {
		m(job)
	}
	return job
}

func suspended(s bool) func(*trainer.TrainJob) {
	return func(j *trainer.TrainJob) { j.Spec.Suspend = ptr.To(s) }
}

func withStatus(s trainer.TrainJobStatus) func(*trainer.TrainJob) {
	return func(j *trainer.TrainJob) { j.Status = *s.DeepCopy() }
}

func activeDeadline(sec int64) func(*trainer.TrainJob) {
	return func(j *trainer.TrainJob) { j.Spec.ActiveDeadlineSeconds = ptr.To(sec) }
}

func ttlAfterFinished(sec int32) func(*trainer.TrainJob) {
	return func(j *trainer.TrainJob) { j.Spec.TTLSecondsAfterFinished = ptr.To(sec) }
}

// jobSet is the JobSet Render makes for the test job (uid jsUID), with
// spec.suspend as given, changed by the mods in order.
func jobSet(t testing.TB, suspend bool, mods ...func(*jobsetv1alpha2.JobSet)) *jobsetv1alpha2.JobSet {
	t.Helper()
	p, err := newAdapter(t).Render(newJob(), rtt.MakeTorchRuntime(rtt.TorchDistributed).Obj())
	if err != nil {
		t.Fatal(err)
	}
	js := p.JobSet()
	js.UID = jsUID
	js.Spec.Suspend = ptr.To(suspend)
	for _, m := range mods {
		m(js)
	}
	return js
}

func jsCondition(typ jobsetv1alpha2.JobSetConditionType, reason, msg string, ltt time.Time) func(*jobsetv1alpha2.JobSet) {
	return func(js *jobsetv1alpha2.JobSet) {
		js.Status.Conditions = append(js.Status.Conditions, metav1.Condition{
			Type: string(typ), Status: metav1.ConditionTrue, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(ltt),
		})
	}
}

func jsReplicated(s ...jobsetv1alpha2.ReplicatedJobStatus) func(*jobsetv1alpha2.JobSet) {
	return func(js *jobsetv1alpha2.JobSet) { js.Status.ReplicatedJobsStatus = s }
}

// observed is what a pass sees: the JobSet (nil: none) and pods.
func observed(js *jobsetv1alpha2.JobSet, pods ...corev1.Pod) *observe.Observed {
	obs := rtt.ObservedJobSet(js)
	obs.Pods = pods
	return obs
}

// queued is observed with Kueue served and these Workloads.
func queued(js *jobsetv1alpha2.JobSet, wls ...kueue.Workload) *observe.Observed {
	obs := observed(js)
	obs.KueueServed = true
	obs.Workloads = wls
	return obs
}

// synced is a pass whose plan synced with these actions, the children being
// as observed but for the JobSet js (nil: as observed).
func synced(obs *observe.Observed, js *jobsetv1alpha2.JobSet, actions map[childsync.Key]childsync.Action) jobframework.Sync {
	children := childsync.Children{}
	for k, v := range obs.Children {
		children[k] = v
	}
	if js != nil {
		children[jsKey] = js
	}
	return jobframework.Sync{Planned: true, Result: childsync.Result{Actions: actions, Children: children}}
}

// failed is a pass whose plan or sync failed with err.
func failed(err error) jobframework.Sync { return jobframework.Sync{Err: err} }

// pod is a trainer pod of the test JobSet.
func pod(name string, phase corev1.PodPhase, ready bool, mods ...func(*corev1.Pod)) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, Labels: map[string]string{
			jobsetv1alpha2.JobSetUIDKey: jsUID, jobsetv1alpha2.ReplicatedJobNameKey: "node",
		}},
		Status: corev1.PodStatus{Phase: phase},
	}
	if phase == corev1.PodRunning {
		s := corev1.ConditionFalse
		if ready {
			s = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: s}}
	}
	for _, m := range mods {
		m(&p)
	}
	return p
}

func readyPod(k int) corev1.Pod {
	return pod(fmt.Sprintf("job-node-0-%d-abcde", k), corev1.PodRunning, true)
}

func donePod(k int) corev1.Pod {
	return pod(fmt.Sprintf("job-node-0-%d-abcde", k), corev1.PodSucceeded, false)
}

// workload is a Kueue Workload in LocalQueue q, created d after the job.
func workload(name string, d time.Duration, conds ...metav1.Condition) kueue.Workload {
	return kueue.Workload{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, CreationTimestamp: metav1.NewTime(tCreated.Add(d))},
		Spec:       kueue.WorkloadSpec{QueueName: "q"},
		Status:     kueue.WorkloadStatus{Conditions: conds},
	}
}

func wlCond(typ string, s metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg}
}

// cond is a TrainJob condition as Trainyard sets it (observedGeneration 1).
func cond(typ string, s metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg, ObservedGeneration: 1}
}

var (
	condSuspended = cond(trainer.TrainJobSuspended, metav1.ConditionTrue, trainer.TrainJobSuspendedReason, "TrainJob is suspended")
	condResumed   = cond(trainer.TrainJobSuspended, metav1.ConditionFalse, trainer.TrainJobResumedReason, "TrainJob is resumed")

	evCreated   = jobframework.Event{Type: corev1.EventTypeNormal, Reason: EventJobSetCreated, Action: "Create", Message: "Created JobSet job"}
	evSuspended = jobframework.Event{Type: corev1.EventTypeNormal, Reason: EventSuspended, Action: "Suspend", Message: "TrainJob is suspended"}
	evResumed   = jobframework.Event{Type: corev1.EventTypeNormal, Reason: EventResumed, Action: "Resume", Message: "TrainJob is resumed"}
)

// waiting is the status of a job whose JobSet runs and whose pods have not
// all started: Created, Pending, ready of 2 nodes.
func waiting(ready int32) trainer.TrainJobStatus {
	return trainer.TrainJobStatus{
		Conditions: nil,
		Phase:      trainer.TrainJobPending, Reason: "WaitingForPods", Message: fmt.Sprintf("%d/2 nodes running", ready),
		NumNodes: ptr.To[int32](2), ReadyNodes: ptr.To(ready),
	}
}

// running is the status of a job whose two nodes run since start.
func running(start time.Duration) trainer.TrainJobStatus {
	return trainer.TrainJobStatus{
		Conditions: nil,
		Phase:      trainer.TrainJobRunning, Reason: "AllNodesStarted", Message: "2/2 nodes running",
		NumNodes: ptr.To[int32](2), ReadyNodes: ptr.To[int32](2), StartTime: at(start),
	}
}

// outcome is what the tests compare of a jobframework.Decision: the events
// sent now, with objects to delete named "<Kind>/<name>" and Retry as its
// message.
type outcome struct {
	Status      trainer.TrainJobStatus
	Events      []jobframework.Event
	Delete      []string
	Requeue     time.Duration
	DeferStatus bool
	Retry       string
}

// statusOpts ignore the conditions' lastTransitionTime, to keep the tables
// short (TestConditionTimesComeFromThePass checks them).
var statusOpts = cmp.Options{
	cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime"),
	cmpopts.EquateEmpty(),
}

// runStatus decides the pass (Status and the framework's rules), checks what
// every pass must hold (its metrics record without panicking; the input job
// left unchanged; the new job a copy of it with only its status changed) and
// returns the comparable outcome.
func runStatus(t *testing.T, a *Adapter, job *trainer.TrainJob, obs *observe.Observed, sync jobframework.Sync, now time.Time) outcome {
	t.Helper()
	before := job.DeepCopy()
	out := jobframework.Decide(a, job, obs, sync, now)
	if diff := cmp.Diff(before, job); diff != "" {
		t.Errorf("Status changed its input job (-before +after):\n%s", diff)
	}
	a.RecordSync(job, sync, now)
	a.RecordStatus(job, out.Job, now)
	updated, ok := out.Job.(*trainer.TrainJob)
	if !ok {
		t.Fatalf("Outcome.Job is %T, want *TrainJob", out.Job)
	}
	if updated == job {
		t.Error("Outcome.Job is the input job, want a copy")
	}
	if diff := cmp.Diff(before.ObjectMeta, updated.ObjectMeta); diff != "" {
		t.Errorf("Outcome.Job metadata differs (-input +outcome):\n%s", diff)
	}
	if diff := cmp.Diff(before.Spec, updated.Spec); diff != "" {
		t.Errorf("Outcome.Job spec differs (-input +outcome):\n%s", diff)
	}
	got := outcome{
		Status:      *updated.Status.DeepCopy(),
		Events:      sent(out),
		Requeue:     out.Requeue,
		DeferStatus: out.Defer,
	}
	for _, o := range out.Delete {
		got.Delete = append(got.Delete, kindOf(o)+"/"+o.GetName())
	}
	if out.Retry != nil {
		got.Retry = out.Retry.Error()
	}
	return got
}

func kindOf(o client.Object) string {
	switch o.(type) {
	case *trainer.TrainJob:
		return "TrainJob"
	case *jobsetv1alpha2.JobSet:
		return "JobSet"
	}
	return fmt.Sprintf("%T", o)
}

// statusCase is one pass of Status.
type statusCase struct {
	job  *trainer.TrainJob
	obs  *observe.Observed
	sync jobframework.Sync
	now  time.Time // zero: tNow
	want outcome
}

func runStatusCases(t *testing.T, cases map[string]statusCase) {
	t.Helper()
	a := newAdapter(t)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			now := tc.now
			if now.IsZero() {
				now = tNow
			}
			obs := tc.obs
			if obs == nil {
				obs = observed(nil)
			}
			got := runStatus(t, a, tc.job, obs, tc.sync, now)
			if diff := cmp.Diff(tc.want, got, statusOpts); diff != "" {
				t.Errorf("Status (-want +got):\n%s", diff)
			}
		})
	}
}

// sent is what the reconciler sends of the decision's events: what syncing
// did when the status is deferred, all of them when it is written.
func sent(out jobframework.Decision) []jobframework.Event {
	if out.Defer {
		return out.SyncEvents
	}
	return append(append([]jobframework.Event(nil), out.SyncEvents...), out.Events...)
}

// planPass is what a pass does to plan: read the inputs while observing, then
// plan from what was observed, with nothing read after.
func planPass(t *testing.T, a *Adapter, r client.Reader, job *trainer.TrainJob, obs *observe.Observed, now time.Time) (*plan.Plan, error) {
	t.Helper()
	if err := a.ReadInputs(context.Background(), r, job, obs); err != nil {
		t.Fatalf("ReadInputs: %v", err)
	}
	return jobframework.PlanFor(a, job, obs, now)
}
