package jobframework

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/childsync"
	"github.com/trainyard/trainyard/pkg/observe"
	"github.com/trainyard/trainyard/pkg/plan"
)

var (
	errBoom  = errors.New("boom")
	errRetry = errors.New("transient")
	errPlan  = errors.New("bad runtime")
)

// running returns an outcome that sets the job's phase to Running, with one
// event and a Record that writes to the op log.
func running(mutate ...func(*Decision)) func(client.Object, *observe.Observed, Sync, *opLog) Decision {
	return func(job client.Object, _ *observe.Observed, _ Sync, _ *opLog) Decision {
		j := job.DeepCopyObject().(*trainer.TrainJob)
		j.Status.Phase = trainer.TrainJobRunning
		out := Decision{Outcome: Outcome{
			Job:    j,
			Events: []Event{{Type: corev1.EventTypeNormal, Reason: "Running", Action: "Run", Message: "job is running"}, {Type: corev1.EventTypeWarning, Reason: "Slow", Action: "Run", Message: "50% done"}},
		}}
		for _, m := range mutate {
			m(&out)
		}
		return out
	}
}

const (
	statusPatchOp = `patch status *v1alpha1.TrainJob job {"status":{"phase":"Running"}}`
	eventRun      = "event job Normal Running Run: job is running"
	eventSlow     = "event job Warning Slow Run: 50% done"
)

// TestDeferredSyncEvents: the events of what a deferring pass synced go out
// with the status, from the pass it defers to, before that pass's own; a job
// that is gone takes them with it.
func TestDeferredSyncEvents(t *testing.T) {
	deferring := running(func(o *Decision) { o.Defer, o.SyncEvents, o.Events = true, o.Events[:1], nil })
	writing := running(func(o *Decision) { o.Events = o.Events[1:] })
	a := &fakeAdapter{status: deferring}
	f := newFixture(t, a, fixtureOpts{objs: []client.Object{trainJob()}})
	req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: testNS, Name: "job"}}
	pass := func() {
		t.Helper()
		if _, err := f.r.Reconcile(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	pass()
	if diff := cmp.Diff([]string{"sync record"}, f.log.get()); diff != "" {
		t.Errorf("deferring pass (-want +got):\n%s", diff)
	}
	a.status = writing
	pass()
	if diff := cmp.Diff([]string{"sync record", statusPatchOp, "record", eventRun, eventSlow}, f.log.get()); diff != "" {
		t.Errorf("after the pass deferred to (-want +got):\n%s", diff)
	}

	// Held, then the job goes: nothing is sent for it, nor kept.
	a.status = deferring
	f.r.memory.holdEvents(req.NamespacedName, []Event{{Type: corev1.EventTypeNormal, Reason: "Old", Action: "Run", Message: "stale"}})
	if err := f.r.client.Delete(context.Background(), trainJob()); err != nil {
		t.Fatal(err)
	}
	pass()
	if evs := f.r.memory.takeEvents(req.NamespacedName); len(evs) != 0 {
		t.Errorf("events kept for a job that is gone: %v", evs)
	}
}

func TestReconcile(t *testing.T) {
	// Each case gets its own objects: the fake client writes into them.
	pod := func() *corev1.Pod { return podOf("job-node-0-0", "job", corev1.PodRunning) }
	labelPatch := func() Patch { return Patch{Object: pod(), Data: []byte(`{"metadata":{"labels":{"a":"b"}}}`)} }
	cases := map[string]struct {
		objs   []client.Object
		funcs  interceptor.Funcs
		plan   func(client.Object, *observe.Observed) (*plan.Plan, error)
		status func(client.Object, *observe.Observed, Sync, *opLog) Decision

		want            ctrl.Result
		wantErrs        []error
		wantErrMsg      string
		wantOps         []string
		wantPlanCalls   int
		wantStatusCalls int
		// wantPhase is the stored job's phase afterwards ("-": the job is gone).
		wantPhase trainer.TrainJobPhase
		// wantSync checks what Status was handed (nil: not checked).
		wantSync *wantSync
	}{
		"job not found: nothing to do": {},
		"reading the job fails": {
			objs: []client.Object{trainJob()},
			funcs: interceptor.Funcs{Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
				return errBoom
			}},
			wantErrs:  []error{errBoom},
			wantPhase: "",
		},
		"job being deleted: skipped": {
			objs: []client.Object{trainJob(func(j *trainer.TrainJob) {
				j.DeletionTimestamp = &metav1.Time{Time: testNow}
				j.Finalizers = []string{"test/keep"}
			})},
			status: running(),
		},
		"job of another controller: skipped": {
			objs:   []client.Object{trainJob(func(j *trainer.TrainJob) { j.Spec.ManagedBy = ptr.To("kueue.x-k8s.io/multikueue") })},
			status: running(),
		},
		"job of this controller by name": {
			objs:            []client.Object{trainJob(func(j *trainer.TrainJob) { j.Spec.ManagedBy = ptr.To("trainer.kubeflow.org/trainjob-controller") })},
			status:          running(),
			wantOps:         []string{statusPatchOp, "record", eventRun, eventSlow},
			wantPlanCalls:   1,
			wantStatusCalls: 1,
			wantPhase:       trainer.TrainJobRunning,
		},
		"status unchanged: not written, events still sent": {
			objs: []client.Object{trainJob()},
			status: func(job client.Object, _ *observe.Observed, _ Sync, _ *opLog) Decision {
				return Decision{Outcome: Outcome{Job: job.DeepCopyObject().(client.Object), Events: []Event{{Type: "Normal", Reason: "Same", Action: "A", Message: "m"}}}}
			},
			wantOps:         []string{"record", "event job Normal Same A: m"},
			wantPlanCalls:   1,
			wantStatusCalls: 1,
		},
		"no job in the outcome: no status write": {
			objs:            []client.Object{trainJob()},
			status:          running(func(o *Decision) { o.Job = nil; o.Events = nil }),
			wantOps:         []string{"record"},
			wantPlanCalls:   1,
			wantStatusCalls: 1,
		},
		"status changed: written once, then recorded, then events in order": {
			objs:            []client.Object{trainJob()},
			status:          running(),
			wantOps:         []string{statusPatchOp, "record", eventRun, eventSlow},
			wantPlanCalls:   1,
			wantStatusCalls: 1,
			wantPhase:       trainer.TrainJobRunning,
		},
		"requeue": {
			objs:            []client.Object{trainJob()},
			status:          running(func(o *Decision) { o.Requeue = 42 * time.Second }),
			want:            ctrl.Result{RequeueAfter: 42 * time.Second},
			wantOps:         []string{statusPatchOp, "record", eventRun, eventSlow},
			wantPlanCalls:   1,
			wantStatusCalls: 1,
			wantPhase:       trainer.TrainJobRunning,
		},
		// What syncing did (the JobSet's creation) is told with the status,
		// by the pass deferred to (TestDeferredSyncEvents); the rest waits
		// with the status too.
		"DeferStatus: no write, no patch, no event; what syncing did recorded": {
			objs: []client.Object{trainJob(), pod()},
			status: running(func(o *Decision) {
				o.Defer = true
				o.SyncEvents, o.Events = o.Events[:1], o.Events[1:]
				o.Requeue = time.Second
				o.Patches = []Patch{labelPatch()}
			}),
			want:            ctrl.Result{RequeueAfter: time.Second},
			wantOps:         []string{"sync record"},
			wantPlanCalls:   1,
			wantStatusCalls: 1,
		},
		"Defer, every event of syncing: held": {
			objs:            []client.Object{trainJob()},
			status:          running(func(o *Decision) { o.Defer, o.SyncEvents, o.Events = true, o.Events, nil }),
			wantOps:         []string{"sync record"},
			wantPlanCalls:   1,
			wantStatusCalls: 1,
		},
		"patches and deletions before the status write": {
			objs: []client.Object{trainJob(), pod(), podOf("job-node-0-1", "job", corev1.PodFailed)},
			status: running(func(o *Decision) {
				o.Patches = []Patch{labelPatch()}
				o.Delete = []client.Object{podOf("job-node-0-1", "job", corev1.PodFailed)}
			}),
			wantOps: []string{
				`patch *v1.Pod job-node-0-0 {"metadata":{"labels":{"a":"b"}}}`,
				"delete *v1.Pod job-node-0-1 uid=uid-job-node-0-1",
				statusPatchOp, "record", eventRun, eventSlow,
			},
			wantPlanCalls:   1,
			wantStatusCalls: 1,
			wantPhase:       trainer.TrainJobRunning,
		},
		"patching or deleting what is gone is fine": {
			objs: []client.Object{trainJob()},
			status: running(func(o *Decision) {
				o.Patches = []Patch{labelPatch()}
				o.Delete = []client.Object{podOf("job-node-0-1", "job", corev1.PodFailed)}
			}),
			wantOps: []string{
				`patch *v1.Pod job-node-0-0 {"metadata":{"labels":{"a":"b"}}}`,
				"delete *v1.Pod job-node-0-1 uid=uid-job-node-0-1",
				statusPatchOp, "record", eventRun, eventSlow,
			},
			wantPlanCalls:   1,
			wantStatusCalls: 1,
			wantPhase:       trainer.TrainJobRunning,
		},
		"patch fails: no status write, error with the Retry": {
			objs: []client.Object{trainJob(), pod()},
			funcs: interceptor.Funcs{Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
				return errBoom
			}},
			status:          running(func(o *Decision) { o.Patches = []Patch{labelPatch()}; o.Retry = errRetry }),
			wantErrs:        []error{errBoom, errRetry},
			wantErrMsg:      "patching job-node-0-0",
			wantOps:         []string{`patch *v1.Pod job-node-0-0 {"metadata":{"labels":{"a":"b"}}}`},
			wantPlanCalls:   1,
			wantStatusCalls: 1,
		},
		"delete fails: no status write": {
			objs: []client.Object{trainJob(), pod()},
			funcs: interceptor.Funcs{Delete: func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error {
				return errBoom
			}},
			status:          running(func(o *Decision) { o.Delete = []client.Object{pod()} }),
			wantErrs:        []error{errBoom},
			wantErrMsg:      "deleting job-node-0-0",
			wantOps:         []string{"delete *v1.Pod job-node-0-0 uid=uid-job-node-0-0"},
			wantPlanCalls:   1,
			wantStatusCalls: 1,
		},
		"deleting the job itself: no status write, no events": {
			objs: []client.Object{trainJob(), pod()},
			status: running(func(o *Decision) {
				o.Delete = []client.Object{pod(), trainJob()}
				o.Requeue = time.Minute
			}),
			wantOps: []string{
				"delete *v1.Pod job-node-0-0 uid=uid-job-node-0-0",
				"delete *v1alpha1.TrainJob job uid=job-uid",
			},
			wantPlanCalls:   1,
			wantStatusCalls: 1,
			wantPhase:       "-",
		},
		"Retry: status written and events sent, then the error": {
			objs:            []client.Object{trainJob()},
			status:          running(func(o *Decision) { o.Retry = errRetry; o.Requeue = time.Minute }),
			wantErrs:        []error{errRetry},
			wantOps:         []string{statusPatchOp, "record", eventRun, eventSlow},
			wantPlanCalls:   1,
			wantStatusCalls: 1,
			wantPhase:       trainer.TrainJobRunning,
		},
		"status write fails: no record, no events": {
			objs: []client.Object{trainJob()},
			funcs: interceptor.Funcs{SubResourcePatch: func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
				return errBoom
			}},
			status:          running(func(o *Decision) { o.Retry = errRetry }),
			wantErrs:        []error{errBoom, errRetry},
			wantErrMsg:      "writing status of TrainJob job",
			wantOps:         []string{statusPatchOp},
			wantPlanCalls:   1,
			wantStatusCalls: 1,
		},
		"plan error goes to Status": {
			objs:            []client.Object{trainJob()},
			plan:            func(client.Object, *observe.Observed) (*plan.Plan, error) { return nil, errPlan },
			wantPlanCalls:   1,
			wantStatusCalls: 1,
			wantSync:        &wantSync{err: errPlan},
		},
		"nil plan: nothing synced": {
			objs:            []client.Object{trainJob()},
			wantPlanCalls:   1,
			wantStatusCalls: 1,
			wantSync:        &wantSync{},
		},
		"plan synced, what sync did goes to Status": {
			objs: []client.Object{trainJob()},
			plan: func(client.Object, *observe.Observed) (*plan.Plan, error) {
				return &plan.Plan{Children: []plan.Child{plan.Apply(configMapOf("hosts", ""))}}, nil
			},
			wantOps:         []string{"create *v1.ConfigMap hosts"},
			wantPlanCalls:   1,
			wantStatusCalls: 1,
			wantSync: &wantSync{planned: true, actions: map[childsync.Key]childsync.Action{
				{GroupKind: schema.GroupKind{Kind: "ConfigMap"}, Name: "hosts"}: childsync.Created,
			}},
		},
		"sync error goes to Status": {
			objs: []client.Object{trainJob()},
			funcs: interceptor.Funcs{Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
				return errBoom
			}},
			plan: func(client.Object, *observe.Observed) (*plan.Plan, error) {
				return &plan.Plan{Children: []plan.Child{plan.Apply(configMapOf("hosts", ""))}}, nil
			},
			wantOps:         []string{"create *v1.ConfigMap hosts"},
			wantPlanCalls:   1,
			wantStatusCalls: 1,
			wantSync:        &wantSync{planned: true, err: errBoom, actions: map[childsync.Key]childsync.Action{}},
		},
		// The namespace's deletion deleted the children first: making them
		// again would be refused, and the job goes with the namespace.
		"namespace terminating: no status, no retry": {
			objs: []client.Object{trainJob()},
			funcs: interceptor.Funcs{Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
				err := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "hosts", errors.New("namespace ns is being terminated"))
				err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause, Field: "metadata.namespace"}}
				return err
			}},
			plan: func(client.Object, *observe.Observed) (*plan.Plan, error) {
				return &plan.Plan{Children: []plan.Child{plan.Apply(configMapOf("hosts", ""))}}, nil
			},
			status:        running(),
			wantOps:       []string{"create *v1.ConfigMap hosts"},
			wantPlanCalls: 1,
		},
		"observing fails: no plan, no status": {
			objs: []client.Object{trainJob()},
			funcs: interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
				return errBoom
			}},
			status:     running(),
			wantErrs:   []error{errBoom},
			wantErrMsg: "listing pods of TrainJob job",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a := &fakeAdapter{plan: tc.plan, status: tc.status}
			f := newFixture(t, a, fixtureOpts{objs: tc.objs, funcs: tc.funcs})
			got, err := f.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: testNS, Name: "job"}})
			if len(tc.wantErrs) == 0 && tc.wantErrMsg == "" && err != nil {
				t.Fatalf("Reconcile: unexpected error %v", err)
			}
			if (len(tc.wantErrs) > 0 || tc.wantErrMsg != "") && err == nil {
				t.Fatalf("Reconcile: no error, want %v", tc.wantErrs)
			}
			for _, want := range tc.wantErrs {
				if !errors.Is(err, want) {
					t.Errorf("Reconcile error %v, want one wrapping %v", err, want)
				}
			}
			if tc.wantErrMsg != "" && !strings.Contains(err.Error(), tc.wantErrMsg) {
				t.Errorf("Reconcile error %q, want it to contain %q", err, tc.wantErrMsg)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantOps, f.log.get()); diff != "" {
				t.Errorf("writes and events (-want +got):\n%s", diff)
			}
			if a.planCalls != tc.wantPlanCalls || a.statusCalls != tc.wantStatusCalls {
				t.Errorf("Plan called %d times, Status %d; want %d, %d", a.planCalls, a.statusCalls, tc.wantPlanCalls, tc.wantStatusCalls)
			}
			if a.planCalls > 0 && !a.gotNow.Equal(testNow) {
				t.Errorf("Plan got now %v, want the clock's %v", a.gotNow, testNow)
			}
			if tc.wantSync != nil {
				tc.wantSync.check(t, a.gotSync)
			}
			if len(tc.objs) == 0 {
				return
			}
			var job trainer.TrainJob
			err = f.c.Get(context.Background(), client.ObjectKey{Namespace: testNS, Name: "job"}, &job)
			if tc.wantPhase == "-" {
				if !apierrors.IsNotFound(err) {
					t.Errorf("job after the pass: err %v, want NotFound", err)
				}
				return
			}
			if err != nil && tc.funcs.Get == nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantPhase, job.Status.Phase); diff != "" {
				t.Errorf("stored phase (-want +got):\n%s", diff)
			}
		})
	}
}

type wantSync struct {
	planned bool
	err     error
	actions map[childsync.Key]childsync.Action
}

func (w *wantSync) check(t *testing.T, got Sync) {
	t.Helper()
	if got.Planned != w.planned {
		t.Errorf("Sync.Planned = %v, want %v", got.Planned, w.planned)
	}
	if (got.Err == nil) != (w.err == nil) || (w.err != nil && !errors.Is(got.Err, w.err)) {
		t.Errorf("Sync.Err = %v, want %v", got.Err, w.err)
	}
	if diff := cmp.Diff(w.actions, got.Result.Actions); diff != "" {
		t.Errorf("Sync.Result.Actions (-want +got):\n%s", diff)
	}
}

// A second pass over a job whose status it just wrote writes nothing.
func TestReconcileTwiceWritesStatusOnce(t *testing.T) {
	a := &fakeAdapter{status: running()}
	f := newFixture(t, a, fixtureOpts{objs: []client.Object{trainJob()}})
	req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: testNS, Name: "job"}}
	for range 2 {
		if _, err := f.r.Reconcile(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	var patches int
	for _, op := range f.log.get() {
		if strings.HasPrefix(op, "patch status ") {
			patches++
		}
	}
	if patches != 1 {
		t.Errorf("status patches = %d, want 1; ops %v", patches, f.log.get())
	}
}

func TestStatusOf(t *testing.T) {
	withStatus := trainJob(func(j *trainer.TrainJob) { j.Status.Phase = trainer.TrainJobRunning })
	cases := map[string]struct {
		obj  client.Object
		want any
	}{
		"job":          {withStatus, trainer.TrainJobStatus{Phase: trainer.TrainJobRunning}},
		"no status":    {&corev1.ConfigMap{}, nil},
		"empty status": {trainJob(), trainer.TrainJobStatus{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, statusOf(tc.obj)); diff != "" {
				t.Errorf("statusOf (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewList(t *testing.T) {
	f := newFixture(t, &fakeAdapter{}, fixtureOpts{})
	cases := map[string]struct {
		gvk     schema.GroupVersionKind
		want    client.ObjectList
		wantErr string
	}{
		"ConfigMap": {gvk: configMapGVK, want: &corev1.ConfigMapList{}},
		"JobSet":    {gvk: jobSetGVK, want: nil},
		// A CRD kind without Go types is listed unstructured.
		"kind unknown to the scheme": {gvk: thingGVK, want: func() client.ObjectList {
			u := &unstructured.UnstructuredList{}
			u.SetGroupVersionKind(schema.GroupVersionKind{Group: "x.io", Version: "v1", Kind: "ThingList"})
			return u
		}()},
		"Pod": {gvk: corev1.SchemeGroupVersion.WithKind("Pod"), want: &corev1.PodList{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := f.r.newList(tc.gvk)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("newList error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.want != nil {
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("newList (-want +got):\n%s", diff)
				}
			}
		})
	}
}
