package jobframework

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/childsync"
	"github.com/trainyard/trainyard/pkg/observe"
)

// remember fills every part of a job's memory: a held change, a held event,
// an expected child and a taken name.
func remember(m *memory, key types.NamespacedName, now time.Time) {
	m.wait(key, now, time.Minute)
	m.holdEvents(key, []Event{{Type: "Normal", Reason: "Held", Action: "A", Message: "m"}})
	cm := childsync.Key{GroupKind: schema.GroupKind{Kind: "ConfigMap"}, Name: "hosts"}
	m.created(key, childsync.Result{Actions: map[childsync.Key]childsync.Action{cm: childsync.Created}}, now,
		func(schema.GroupKind) bool { return true })
	m.refused(key, &childsync.ExistsError{Key: childsync.Key{GroupKind: schema.GroupKind{Kind: "ConfigMap"}, Name: "taken"}, Err: errors.New("exists")})
}

// TestMemoryDropsEmptyEntries: an entry goes once it holds nothing, and the
// map with the last entry; forget drops everything of a job at once.
func TestMemoryDropsEmptyEntries(t *testing.T) {
	var m memory
	a, b := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}
	remember(&m, a, testNow)
	m.holdEvents(b, []Event{{Reason: "X"}})
	if m.size() != 2 {
		t.Fatalf("size %d, want 2", m.size())
	}
	if evs := m.takeEvents(b); len(evs) != 1 || m.size() != 1 {
		t.Errorf("takeEvents: %v, size %d; want one event and b gone", evs, m.size())
	}
	m.done(a)
	if m.held(a) || m.size() != 1 {
		t.Errorf("after done: held %v, size %d; want the change gone and a kept (it holds events)", m.held(a), m.size())
	}
	m.forget(a)
	if m.size() != 0 || m.jobs != nil {
		t.Errorf("after forget: %d jobs, map %v; want none and no map", m.size(), m.jobs)
	}
	// Clearing what a job does not have creates nothing.
	m.done(a)
	m.takeEvents(a)
	m.keepTaken(a, nil)
	if m.jobs != nil {
		t.Errorf("clearing an absent job made an entry: %v", m.jobs)
	}
}

// TestReconcileForgetsEndedJobs: every path that ends a job's life in the
// reconciler (gone, being deleted, another controller's, deleted by its
// TTL) drops all it remembered of the job.
func TestReconcileForgetsEndedJobs(t *testing.T) {
	cases := map[string]struct {
		objs   []client.Object
		status func(client.Object, *observe.Observed, Sync, *opLog) Decision
	}{
		"gone": {},
		"being deleted": {objs: []client.Object{trainJob(func(j *trainer.TrainJob) {
			j.DeletionTimestamp = &metav1.Time{Time: testNow}
			j.Finalizers = []string{"x"}
		})}},
		"another's": {objs: []client.Object{trainJob(func(j *trainer.TrainJob) { j.Spec.ManagedBy = ptr.To("kueue.x-k8s.io/multikueue") })}},
		"deleted by TTL": {objs: []client.Object{trainJob()}, status: func(job client.Object, _ *observe.Observed, _ Sync, _ *opLog) Decision {
			return Decision{Outcome: Outcome{Delete: []client.Object{job}}}
		}},
	}
	req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: testNS, Name: "job"}}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, &fakeAdapter{status: c.status}, fixtureOpts{objs: c.objs, kinds: []schema.GroupVersionKind{configMapGVK}})
			remember(&f.r.memory, req.NamespacedName, f.r.wall.Now().Add(-time.Hour)) // nothing awaited any more
			if _, err := f.r.Reconcile(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			if n := f.r.memory.size(); n != 0 {
				t.Errorf("%d jobs remembered after the job's end, want none: %+v", n, f.r.memory.jobs[req.NamespacedName])
			}
		})
	}
}
