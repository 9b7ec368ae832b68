package jobframework

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/trainyard/trainyard/pkg/observe"
	"github.com/trainyard/trainyard/pkg/plan"
)

// TestReconcileWaitsForCreatedChildren: a pass that comes before the cache
// shows the children an earlier pass created neither plans nor writes (it
// would create them again, to be told AlreadyExists); once the cache shows
// them, or after expectWait, passes go on.
func TestReconcileWaitsForCreatedChildren(t *testing.T) {
	type step struct {
		at      time.Duration // wall clock, from the first pass
		hide    bool          // the cache does not show the ConfigMap yet
		want    ctrl.Result
		wantOps []string
		plans   int // Plan calls so far
	}
	cases := map[string][]step{
		"the cache lags, then shows the child": {
			{wantOps: []string{"create *v1.ConfigMap hosts"}, plans: 1},
			{at: time.Second, hide: true, want: ctrl.Result{RequeueAfter: expectWait - time.Second}, plans: 1},
			{at: 2 * time.Second, plans: 2},
			// Nothing is awaited any more: a later lag is not waited for.
			{at: 3 * time.Second, hide: true, wantOps: []string{"create *v1.ConfigMap hosts"}, plans: 3},
		},
		"the child never shows: passes go on after expectWait": {
			{wantOps: []string{"create *v1.ConfigMap hosts"}, plans: 1},
			{at: expectWait - time.Millisecond, hide: true, want: ctrl.Result{RequeueAfter: time.Millisecond}, plans: 1},
			{at: expectWait, hide: true, wantOps: []string{"create *v1.ConfigMap hosts"}, plans: 2},
		},
	}
	req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: testNS, Name: "job"}}
	for name, steps := range cases {
		t.Run(name, func(t *testing.T) {
			hide := false
			a := &fakeAdapter{plan: func(client.Object, *observe.Observed) (*plan.Plan, error) {
				return &plan.Plan{Children: []plan.Child{plan.Apply(configMapOf("hosts", ""))}}, nil
			}}
			f := newFixture(t, a, fixtureOpts{objs: []client.Object{trainJob()}, kinds: []schema.GroupVersionKind{configMapGVK},
				funcs: interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					if _, isCM := list.(*corev1.ConfigMapList); isCM && hide {
						return nil
					}
					return c.List(ctx, list, opts...)
				}}})
			wall := clocktesting.NewFakePassiveClock(testNow)
			f.r.wall = wall
			seen := 0
			for k, s := range steps {
				wall.SetTime(testNow.Add(s.at))
				hide = s.hide
				got, err := f.r.Reconcile(context.Background(), req)
				if err != nil {
					// A create of what exists fails: the fake client has it.
					if s.wantOps == nil {
						t.Fatalf("step %d: %v", k, err)
					}
				}
				if diff := cmp.Diff(s.want, got); diff != "" {
					t.Errorf("step %d: result (-want +got):\n%s", k, diff)
				}
				ops := f.log.get()[seen:]
				seen = len(f.log.get())
				if len(ops) == 0 {
					ops = nil
				}
				if diff := cmp.Diff(s.wantOps, ops); diff != "" {
					t.Errorf("step %d: writes (-want +got):\n%s", k, diff)
				}
				if a.planCalls != s.plans {
					t.Errorf("step %d: %d Plan calls, want %d", k, a.planCalls, s.plans)
				}
			}
		})
	}
}
