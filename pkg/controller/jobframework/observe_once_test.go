package jobframework

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/trainyard/trainyard/pkg/childsync"
	"github.com/trainyard/trainyard/pkg/observe"
	"github.com/trainyard/trainyard/pkg/plan"
)

// TestReconcileReadsNothingAfterObserve: a pass reads the job, then observes
// (its children, pods, Workloads and the kind's inputs), and reads nothing
// after: the reader fails the test when it is called once the pass planned.
func TestReconcileReadsNothingAfterObserve(t *testing.T) {
	cases := map[string]struct {
		objs   []client.Object
		plan   func(client.Object, *observe.Observed) (*plan.Plan, error)
		status func(client.Object, *observe.Observed, Sync, *opLog) Decision
	}{
		"children created, status written": {
			plan: func(client.Object, *observe.Observed) (*plan.Plan, error) {
				return &plan.Plan{Children: []plan.Child{plan.Apply(configMapOf("hosts", "")), plan.CreateOnce(configMapOf("keys", ""))}}, nil
			},
			status: running(),
		},
		"children up to date, pods patched and deleted": {
			objs: []client.Object{configMapOf("hosts", "job-uid"), podOf("job-node-0-0", "job", corev1.PodRunning)},
			plan: func(client.Object, *observe.Observed) (*plan.Plan, error) {
				return &plan.Plan{Children: []plan.Child{plan.CreateOnce(configMapOf("hosts", ""))}}, nil
			},
			status: running(func(d *Decision) {
				d.Patches = []Patch{{Object: podOf("job-node-0-0", "job", corev1.PodRunning), Data: []byte(`{"metadata":{"labels":{"a":"b"}}}`)}}
				d.Delete = []client.Object{podOf("job-node-0-0", "job", corev1.PodRunning)}
			}),
		},
		"status deferred": {status: running(func(d *Decision) { d.Defer = true })},
	}
	req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: testNS, Name: "job"}}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a := &fakeAdapter{plan: tc.plan, status: tc.status, inputs: "runtime"}
			reads, late := 0, 0
			check := func() {
				reads++
				if a.observed {
					late++
				}
			}
			funcs := interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					check()
					return c.Get(ctx, key, obj, opts...)
				},
				List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					check()
					return c.List(ctx, list, opts...)
				},
			}
			objs := append([]client.Object{trainJob(), configMapOf("runtime", "")}, tc.objs...)
			f := newFixture(t, a, fixtureOpts{objs: objs, funcs: funcs, kinds: []schema.GroupVersionKind{configMapGVK}})
			if _, err := f.r.Reconcile(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			if a.planCalls != 1 || reads == 0 {
				t.Fatalf("%d plans, %d reads: the pass did not run", a.planCalls, reads)
			}
			if late > 0 {
				t.Errorf("%d of %d reads came after observing (ops: %v)", late, reads, f.log.get())
			}
			if cm, ok := a.gotObs.Inputs.(*corev1.ConfigMap); !ok || cm.Name != "runtime" {
				t.Errorf("Plan saw inputs %v, want the ConfigMap ReadInputs read", a.gotObs.Inputs)
			}
		})
	}
}

// TestReconcileObservesTakenNames: a create refused because someone else holds
// the name is retried, and the next pass observes what holds it (with nothing
// read after observing): syncing then reports ErrNotOwned and writes nothing.
func TestReconcileObservesTakenNames(t *testing.T) {
	theirs := configMapOf("hosts", "other-uid")
	a := &fakeAdapter{plan: func(client.Object, *observe.Observed) (*plan.Plan, error) {
		return &plan.Plan{Children: []plan.Child{plan.Apply(configMapOf("hosts", ""))}}, nil
	}}
	late := 0
	funcs := interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if a.observed {
				late++
			}
			return c.Get(ctx, key, obj, opts...)
		},
	}
	f := newFixture(t, a, fixtureOpts{objs: []client.Object{trainJob(), theirs}, funcs: funcs, kinds: []schema.GroupVersionKind{configMapGVK}})
	f.r.decide = nil // the framework's rules: the refused create is retried
	req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: testNS, Name: "job"}}

	_, err := f.r.Reconcile(context.Background(), req)
	var exists *childsync.ExistsError
	if !errors.As(err, &exists) || !errors.As(a.gotSync.Err, &exists) {
		t.Fatalf("first pass: error %v, sync error %v; want the refused create (retried)", err, a.gotSync.Err)
	}
	a.observed = false
	if _, err := f.r.Reconcile(context.Background(), req); err != nil {
		t.Fatalf("second pass: %v (ErrNotOwned is not retried)", err)
	}
	if !errors.Is(a.gotSync.Err, childsync.ErrNotOwned) {
		t.Errorf("second pass: sync error %v, want ErrNotOwned", a.gotSync.Err)
	}
	if got := a.gotObs.Taken[exists.Key]; got == nil || got.GetName() != "hosts" {
		t.Errorf("second pass observed taken %v, want the ConfigMap hosts", a.gotObs.Taken)
	}
	if diff := cmp.Diff([]string{"create *v1.ConfigMap hosts"}, f.log.get()); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	if late > 0 {
		t.Errorf("%d reads after observing", late)
	}
}

// TestObjectOf: what observeTaken reads a taken name into: the scheme's type,
// unstructured for a CRD without Go types, an error for a kind not observed.
func TestObjectOf(t *testing.T) {
	f := newFixture(t, &fakeAdapter{}, fixtureOpts{kinds: []schema.GroupVersionKind{configMapGVK, thingGVK}})
	cases := map[string]struct {
		gk      schema.GroupKind
		want    string
		wantErr bool
	}{
		"typed":        {gk: configMapGVK.GroupKind(), want: "*v1.ConfigMap"},
		"unstructured": {gk: thingGVK.GroupKind(), want: "*unstructured.Unstructured"},
		"not observed": {gk: schema.GroupKind{Kind: "Secret"}, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o, err := f.r.objectOf(childsync.Key{GroupKind: tc.gk, Name: "x"})
			if (err != nil) != tc.wantErr {
				t.Fatalf("objectOf error %v, want error: %v", err, tc.wantErr)
			}
			if got := fmt.Sprintf("%T", o); err == nil && got != tc.want {
				t.Errorf("objectOf = %s, want %s", got, tc.want)
			}
		})
	}
}
