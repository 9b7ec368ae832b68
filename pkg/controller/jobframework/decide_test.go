package jobframework

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/childsync"
	"github.com/trainyard/trainyard/pkg/observe"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
)

// policyAdapter is a kind with every optional interface, each answering what
// the test says.
type policyAdapter struct {
	fakeAdapter
	counts   bool
	deferFor time.Duration
	extra    []Event
}

func (a *policyAdapter) CountsOnly(client.Object, client.Object) bool           { return a.counts }
func (a *policyAdapter) DeferStatus(client.Object, client.Object) time.Duration { return a.deferFor }
func (a *policyAdapter) SyncEvents(client.Object, Sync) []Event                 { return a.extra }

// TestDecide: the framework's rules over a kind's Outcome: events of what
// syncing did, deferral, counts-only, retries.
func TestDecide(t *testing.T) {
	jsKey := childsync.Key{GroupKind: observe.JobSetKind, Name: "job"}
	did := func(a childsync.Action) Sync {
		return Sync{Planned: true, Result: childsync.Result{Actions: map[childsync.Key]childsync.Action{jsKey: a}}}
	}
	ev := func(reason, action, msg string) Event {
		return Event{Type: "Normal", Reason: reason, Action: action, Message: msg}
	}
	warn := Event{Type: "Warning", Reason: "Deprecated", Action: "Create", Message: "w"}
	running := func(job client.Object, _ *observe.Observed, _ Sync, _ *opLog) Decision {
		j := job.DeepCopyObject().(*trainer.TrainJob)
		j.Status.Phase = trainer.TrainJobRunning
		return Decision{Outcome: Outcome{Job: j}}
	}
	cases := map[string]struct {
		adapter Adapter
		sync    Sync
		want    Decision
	}{
		"JobSet created: told at once, status left to its creation event": {
			adapter: &fakeAdapter{}, sync: did(childsync.Created),
			want: Decision{SyncEvents: []Event{ev(EventJobSetCreated, "Create", "Created JobSet job")}, Defer: true},
		},
		"JobSet created, the kind's own warnings after the framework's event": {
			adapter: &policyAdapter{extra: []Event{warn}}, sync: did(childsync.Created),
			want: Decision{SyncEvents: []Event{ev(EventJobSetCreated, "Create", "Created JobSet job"), warn}, Defer: true},
		},
		"JobSet recreated": {
			adapter: &fakeAdapter{}, sync: did(childsync.Recreated),
			want: Decision{SyncEvents: []Event{ev(EventJobSetRecreated, "Create", "Recreated suspended JobSet job: its immutable template changed")}},
		},
		"JobSet updated": {
			adapter: &fakeAdapter{}, sync: did(childsync.Updated),
			want: Decision{SyncEvents: []Event{ev(EventJobSetUpdated, "Update", "Updated suspended JobSet job")}},
		},
		"transient error: retried": {
			adapter: &fakeAdapter{}, sync: Sync{Planned: true, Err: errBoom},
			want: Decision{Retry: errBoom},
		},
		"status changed: counts only, per the kind": {
			adapter: &policyAdapter{fakeAdapter: fakeAdapter{status: running}, counts: true},
			want:    Decision{CountsOnly: true},
		},
		"status changed while another controller writes: deferred with a bound": {
			adapter: &policyAdapter{fakeAdapter: fakeAdapter{status: running}, deferFor: time.Second},
			want:    Decision{Defer: true, DeferFor: time.Second},
		},
		"status unchanged: the kind is not asked": {
			adapter: &policyAdapter{counts: true, deferFor: time.Second},
		},
		"a sync error: no bounded deferral": {
			adapter: &policyAdapter{fakeAdapter: fakeAdapter{status: running}, deferFor: time.Second},
			sync:    Sync{Err: fmt.Errorf("%w: x", childsync.ErrNotOwned)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Decide(tc.adapter, trainJob(), &observe.Observed{}, tc.sync, testNow)
			got.Outcome = Outcome{}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateErrors(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Decide (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPermanent: the errors retrying cannot fix.
func TestPermanent(t *testing.T) {
	cases := map[string]struct {
		err  error
		want bool
	}{
		"invalid input":       {&framework.InvalidError{}, true},
		"runtime unsupported": {fmt.Errorf("%w: x", runtime.ErrUnsupported), true},
		"runtime not found":   {fmt.Errorf("%w: x", runtime.ErrNotFound), true},
		"child not owned":     {fmt.Errorf("%w: x", childsync.ErrNotOwned), true},
		"kind not served":     {fmt.Errorf("%w: x", childsync.ErrKindNotServed), true},
		"an API error":        {errors.New("connection refused"), false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Permanent(tc.err); got != tc.want {
				t.Errorf("Permanent(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
