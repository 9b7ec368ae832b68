package jobframework

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/observe"
	"github.com/trainyard/trainyard/pkg/plan"
)

// phaseTo is an outcome that sets the job's phase and sends one event named
// after it; counts marks it a change of counts only.
func phaseTo(phase trainer.TrainJobPhase, counts bool, mutate ...func(*Decision)) func(client.Object, *observe.Observed, Sync, *opLog) Decision {
	return func(job client.Object, _ *observe.Observed, _ Sync, _ *opLog) Decision {
		j := job.DeepCopyObject().(*trainer.TrainJob)
		j.Status.Phase = phase
		out := Decision{CountsOnly: counts, Outcome: Outcome{Job: j,
			Events: []Event{{Type: "Normal", Reason: string(phase), Action: "A", Message: "m"}}}}
		for _, m := range mutate {
			m(&out)
		}
		return out
	}
}

// deferFor defers the status for at most d; none of the events says what
// syncing did.
func deferFor(d time.Duration) func(*Decision) {
	return func(o *Decision) { o.Defer, o.DeferFor = true, d }
}

// holdStep is one pass at a moment of the wall clock.
type holdStep struct {
	at     time.Duration // wall clock, from the start
	status func(client.Object, *observe.Observed, Sync, *opLog) Decision
	plan   func(client.Object, *observe.Observed) (*plan.Plan, error)
	delete bool // the job is gone before the pass

	want    ctrl.Result
	wantErr bool
	wantOps []string // what this pass wrote and sent
	// wantHeld is whether the job has a waiting change after the pass.
	wantHeld bool
}

func patchPhase(p string) string {
	return `patch status *v1alpha1.TrainJob job {"status":{"phase":"` + p + `"}}`
}

func eventOf(reason string) string { return "event job Normal " + reason + " A: m" }

// TestReconcileHoldsStatus: with delays, a status change waits until the first
// of the waiting changes is due, then goes out in one write with its record
// and events; passes that must act write at once; a change is never dropped.
func TestReconcileHoldsStatus(t *testing.T) {
	delays := Delays{StatusDelay: time.Second, CountsDelay: 5 * time.Second}
	applyCM := func(client.Object, *observe.Observed) (*plan.Plan, error) {
		return &plan.Plan{Children: []plan.Child{plan.Apply(configMapOf("hosts", ""))}}, nil
	}
	cases := map[string]struct {
		delays Delays
		steps  []holdStep
	}{
		"no delays: written at once": {
			steps: []holdStep{{status: phaseTo(trainer.TrainJobPending, false),
				wantOps: []string{patchPhase("Pending"), "record", eventOf("Pending")}}},
		},
		"a phase change waits StatusDelay, then goes out with its events": {
			delays: delays,
			steps: []holdStep{
				{status: phaseTo(trainer.TrainJobPending, false), want: ctrl.Result{RequeueAfter: time.Second}, wantHeld: true},
				{at: 400 * time.Millisecond, status: phaseTo(trainer.TrainJobRunning, false),
					want: ctrl.Result{RequeueAfter: 600 * time.Millisecond}, wantHeld: true},
				{at: time.Second, status: phaseTo(trainer.TrainJobRunning, false),
					wantOps: []string{patchPhase("Running"), "record", eventOf("Running")}},
			},
		},
		"a change of counts waits CountsDelay, unless another change comes first": {
			delays: delays,
			steps: []holdStep{
				{status: phaseTo(trainer.TrainJobPending, true), want: ctrl.Result{RequeueAfter: 5 * time.Second}, wantHeld: true},
				{at: 2 * time.Second, status: phaseTo(trainer.TrainJobPending, true), want: ctrl.Result{RequeueAfter: 3 * time.Second}, wantHeld: true},
				// A phase change is due a second after it was seen.
				{at: 3 * time.Second, status: phaseTo(trainer.TrainJobRunning, false), want: ctrl.Result{RequeueAfter: time.Second}, wantHeld: true},
				{at: 4 * time.Second, status: phaseTo(trainer.TrainJobRunning, false),
					wantOps: []string{patchPhase("Running"), "record", eventOf("Running")}},
			},
		},
		"counts alone go out when due": {
			delays: delays,
			steps: []holdStep{
				{status: phaseTo(trainer.TrainJobPending, true), want: ctrl.Result{RequeueAfter: 5 * time.Second}, wantHeld: true},
				{at: 5 * time.Second, status: phaseTo(trainer.TrainJobPending, true),
					wantOps: []string{patchPhase("Pending"), "record", eventOf("Pending")}},
			},
		},
		"the adapter's own requeue comes first when sooner": {
			delays: delays,
			steps: []holdStep{{status: phaseTo(trainer.TrainJobPending, false, func(o *Decision) { o.Requeue = 300 * time.Millisecond }),
				want: ctrl.Result{RequeueAfter: 300 * time.Millisecond}, wantHeld: true}},
		},
		"a pass that wrote a child writes its status at once": {
			delays: delays,
			steps: []holdStep{{plan: applyCM, status: phaseTo(trainer.TrainJobPending, false),
				wantOps: []string{"create *v1.ConfigMap hosts", patchPhase("Pending"), "record", eventOf("Pending")}}},
		},
		"a pass with a transient error writes its status at once": {
			delays: delays,
			steps: []holdStep{
				{status: phaseTo(trainer.TrainJobPending, false), want: ctrl.Result{RequeueAfter: time.Second}, wantHeld: true},
				{at: 100 * time.Millisecond, status: phaseTo(trainer.TrainJobPending, false, func(o *Decision) { o.Retry = errRetry }),
					wantErr: true, wantOps: []string{patchPhase("Pending"), "record", eventOf("Pending")}},
			},
		},
		"the change undone: nothing to write, the wait is forgotten": {
			delays: delays,
			steps: []holdStep{
				{status: phaseTo(trainer.TrainJobPending, false), want: ctrl.Result{RequeueAfter: time.Second}, wantHeld: true},
				{at: 500 * time.Millisecond, status: phaseTo("", false, func(o *Decision) { o.Events = nil }), wantOps: []string{"record"}},
				// A new change waits its full delay again.
				{at: 900 * time.Millisecond, status: phaseTo(trainer.TrainJobRunning, false), want: ctrl.Result{RequeueAfter: time.Second}, wantHeld: true},
			},
		},
		// Another controller is between two writes of the job (Kueue): the
		// status waits even in a pass that wrote a child, until the next
		// pass no longer defers, or the bound.
		"a bounded deferral ends with the other controller's write": {
			delays: delays,
			steps: []holdStep{
				{plan: applyCM, status: phaseTo(trainer.TrainJobPending, false, deferFor(time.Second)),
					want: ctrl.Result{RequeueAfter: time.Second}, wantHeld: true, wantOps: []string{"create *v1.ConfigMap hosts", "sync record"}},
				{at: 100 * time.Millisecond, status: phaseTo(trainer.TrainJobRunning, false),
					want: ctrl.Result{RequeueAfter: 900 * time.Millisecond}, wantHeld: true},
				{at: time.Second, status: phaseTo(trainer.TrainJobRunning, false),
					wantOps: []string{patchPhase("Running"), "record", eventOf("Running")}},
			},
		},
		"a bounded deferral ends at its bound": {
			delays: delays,
			steps: []holdStep{
				{status: phaseTo(trainer.TrainJobPending, false, deferFor(time.Second)), want: ctrl.Result{RequeueAfter: time.Second}, wantHeld: true, wantOps: []string{"sync record"}},
				{at: 600 * time.Millisecond, status: phaseTo(trainer.TrainJobPending, false, deferFor(time.Second)),
					want: ctrl.Result{RequeueAfter: 400 * time.Millisecond}, wantHeld: true, wantOps: []string{"sync record"}},
				{at: time.Second, status: phaseTo(trainer.TrainJobPending, false, deferFor(time.Second)),
					wantOps: []string{patchPhase("Pending"), "sync record", "record", eventOf("Pending")}},
			},
		},
		// The pass that created the JobSet leaves the status to the pass
		// the JobSet's creation event brings, which writes at once: a new
		// job costs two passes, not a third after StatusDelay.
		"a deferral to a child's creation event: the next pass writes at once": {
			delays: delays,
			steps: []holdStep{
				{status: phaseTo(trainer.TrainJobPending, false, func(o *Decision) { o.Defer = true }),
					wantOps: []string{"sync record"}, wantHeld: true},
				{at: 100 * time.Millisecond, status: phaseTo(trainer.TrainJobPending, false),
					wantOps: []string{patchPhase("Pending"), "record", eventOf("Pending")}},
			},
		},
		"a deleted job's wait is forgotten": {
			delays: delays,
			steps: []holdStep{
				{status: phaseTo(trainer.TrainJobPending, false), want: ctrl.Result{RequeueAfter: time.Second}, wantHeld: true},
				{at: time.Second, delete: true},
			},
		},
	}
	req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: testNS, Name: "job"}}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a := &fakeAdapter{}
			f := newFixture(t, a, fixtureOpts{objs: []client.Object{trainJob()}, kinds: []schema.GroupVersionKind{configMapGVK}})
			wall := clocktesting.NewFakePassiveClock(testNow)
			f.r.wall, f.r.delays = wall, tc.delays
			seen := 0
			for k, s := range tc.steps {
				wall.SetTime(testNow.Add(s.at))
				a.status, a.plan = s.status, s.plan
				if s.delete {
					if err := f.c.Delete(context.Background(), trainJob()); err != nil {
						t.Fatal(err)
					}
				}
				got, err := f.r.Reconcile(context.Background(), req)
				if (err != nil) != s.wantErr {
					t.Fatalf("step %d: Reconcile error %v, want error: %v", k, err, s.wantErr)
				}
				if diff := cmp.Diff(s.want, got); diff != "" {
					t.Errorf("step %d: result (-want +got):\n%s", k, diff)
				}
				ops := f.log.get()
				if s.delete {
					ops = ops[seen+1:] // the test's own delete
				} else {
					ops = ops[seen:]
				}
				if len(ops) == 0 {
					ops = nil
				}
				if diff := cmp.Diff(s.wantOps, ops); diff != "" {
					t.Errorf("step %d: writes and events (-want +got):\n%s", k, diff)
				}
				seen = len(f.log.get())
				if held := f.r.memory.held(req.NamespacedName); held != s.wantHeld {
					t.Errorf("step %d: held = %v, want %v", k, held, s.wantHeld)
				}
			}
		})
	}
}
