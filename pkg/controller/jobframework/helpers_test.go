package jobframework

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/childsync"
	"github.com/trainyard/trainyard/pkg/observe"
	"github.com/trainyard/trainyard/pkg/plan"
)

const testNS = "ns"

var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, jobsetv1alpha2.AddToScheme, trainer.AddToScheme, kueue.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// fakeAdapter is a job kind (TrainJob objects) whose plan and status the test
// sets, and which remembers what the reconciler handed it.
type fakeAdapter struct {
	plan   func(job client.Object, obs *observe.Observed) (*plan.Plan, error)
	status func(job client.Object, obs *observe.Observed, s Sync, log *opLog) Decision
	// deferred: the last decision deferred the status (RecordSync logs
	// then only, as the old SyncRecord did).
	deferred bool
	log      *opLog

	planCalls, statusCalls int
	// inputs is what ReadInputs reads (a ConfigMap by name; "" none);
	// observed is set once the pass planned: reading then fails the test
	// (TestReconcileReadsNothingAfterObserve).
	inputs   string
	observed bool
	gotObs   *observe.Observed
	gotSync  Sync
	gotNow   time.Time
}

func (*fakeAdapter) Kind() string       { return "TrainJob" }
func (*fakeAdapter) New() client.Object { return &trainer.TrainJob{} }

func (*fakeAdapter) Ours(o client.Object) bool {
	m := o.(*trainer.TrainJob).Spec.ManagedBy
	return m == nil || *m == "trainer.kubeflow.org/trainjob-controller"
}

func (a *fakeAdapter) Plan(job client.Object, obs *observe.Observed, now time.Time) (*plan.Plan, error) {
	a.planCalls++
	a.observed = true
	a.gotObs, a.gotNow = obs, now
	if a.plan == nil {
		return nil, nil
	}
	return a.plan(job, obs)
}

func (a *fakeAdapter) Status(job client.Object, obs *observe.Observed, s Sync, now time.Time) Outcome {
	return a.decide(job, obs, s, now).Outcome
}

// decide is the test's Decision in place of Decide's.
func (a *fakeAdapter) decide(job client.Object, obs *observe.Observed, s Sync, _ time.Time) Decision {
	a.statusCalls++
	a.gotSync = s
	if a.status == nil {
		a.deferred = false
		return Decision{Outcome: Outcome{Job: job.DeepCopyObject().(client.Object)}}
	}
	d := a.status(job, obs, s, a.log)
	a.deferred = d.Defer
	return d
}

// ReadInputs implements InputReader: the ConfigMap named inputs, if any.
func (a *fakeAdapter) ReadInputs(ctx context.Context, r client.Reader, job client.Object, obs *observe.Observed) error {
	if a.inputs == "" {
		return nil
	}
	var cm corev1.ConfigMap
	if err := r.Get(ctx, client.ObjectKey{Namespace: job.GetNamespace(), Name: a.inputs}, &cm); err != nil {
		return err
	}
	obs.Inputs = &cm
	return nil
}

// RecordSync implements Recorder.
func (a *fakeAdapter) RecordSync(client.Object, Sync, time.Time) {
	if a.deferred {
		a.log.add("sync record")
	}
}

// RecordStatus implements Recorder; a test without a status func records
// nothing.
func (a *fakeAdapter) RecordStatus(client.Object, client.Object, time.Time) {
	if a.status != nil {
		a.log.add("record")
	}
}

// opLog is the order in which a pass wrote, recorded and sent events.
type opLog struct {
	mu  sync.Mutex
	ops []string
}

func (l *opLog) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ops = append(l.ops, fmt.Sprintf(format, args...))
}

func (l *opLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.ops...)
}

// logRecorder is an events.EventRecorder that writes to the op log.
type logRecorder struct{ log *opLog }

func (r logRecorder) Eventf(regarding, _ runtime.Object, eventtype, reason, action, note string, args ...any) {
	name := ""
	if o, ok := regarding.(client.Object); ok {
		name = o.GetName()
	}
	r.log.add("event %s %s %s %s: %s", name, eventtype, reason, action, fmt.Sprintf(note, args...))
}

// fixture is a reconciler on a fake client with the cache indexes.
type fixture struct {
	r       *Reconciler
	c       client.Client
	adapter *fakeAdapter
	log     *opLog
}

type fixtureOpts struct {
	objs  []client.Object
	funcs interceptor.Funcs
	kinds []schema.GroupVersionKind
	kueue bool
}

// newFixture builds the reconciler. Writes (Create, Patch, Delete, status
// patches) go to the op log; funcs may fail them (a func returning nil lets
// the write through).
func newFixture(t *testing.T, a *fakeAdapter, o fixtureOpts) *fixture {
	t.Helper()
	log := &opLog{}
	a.log = log
	wrap := interceptor.Funcs{
		Get:  o.funcs.Get,
		List: o.funcs.List,
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			log.add("create %T %s", obj, obj.GetName())
			if o.funcs.Create != nil {
				if err := o.funcs.Create(ctx, c, obj, opts...); err != nil {
					return err
				}
			}
			return c.Create(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			data, _ := patch.Data(obj)
			log.add("patch %T %s %s", obj, obj.GetName(), data)
			if o.funcs.Patch != nil {
				if err := o.funcs.Patch(ctx, c, obj, patch, opts...); err != nil {
					return err
				}
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			do := client.DeleteOptions{}
			do.ApplyOptions(opts)
			uid := ""
			if do.Preconditions != nil && do.Preconditions.UID != nil {
				uid = string(*do.Preconditions.UID)
			}
			log.add("delete %T %s uid=%s", obj, obj.GetName(), uid)
			if o.funcs.Delete != nil {
				if err := o.funcs.Delete(ctx, c, obj, opts...); err != nil {
					return err
				}
			}
			return c.Delete(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			data, _ := patch.Data(obj)
			log.add("patch %s %T %s %s", sub, obj, obj.GetName(), data)
			if o.funcs.SubResourcePatch != nil {
				if err := o.funcs.SubResourcePatch(ctx, c, sub, obj, patch, opts...); err != nil {
					return err
				}
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).
		WithObjects(o.objs...).
		WithStatusSubresource(&trainer.TrainJob{}).
		WithIndex(&corev1.ConfigMap{}, ownerIndex, controllerUID).
		WithIndex(&corev1.Secret{}, ownerIndex, controllerUID).
		WithIndex(&jobsetv1alpha2.JobSet{}, ownerIndex, controllerUID).
		WithIndex(&corev1.Pod{}, podJobSetIndex, jobSetName).
		WithIndex(&kueue.Workload{}, workloadJobIndex, workloadJobUID).
		WithIndex(thing(""), ownerIndex, controllerUID).
		WithInterceptorFuncs(wrap).
		Build()
	r := &Reconciler{
		adapter:  a,
		client:   c,
		recorder: logRecorder{log: log},
		clock:    clocktesting.NewFakePassiveClock(testNow),
		wall:     clocktesting.NewFakePassiveClock(testNow),
		syncer:   &childsync.Syncer{Client: c, FieldOwner: FieldOwner},
		kinds:    o.kinds,
		kueue:    o.kueue,
	}
	r.decide = func(_ Adapter, job client.Object, obs *observe.Observed, s Sync, now time.Time) Decision {
		return a.decide(job, obs, s, now)
	}
	return &fixture{r: r, c: c, adapter: a, log: log}
}

// thingGVK is a CRD kind the scheme does not know (no Go types).
var thingGVK = schema.GroupVersionKind{Group: "x.io", Version: "v1", Kind: "Thing"}

// thing is an object of thingGVK, controlled by ownerUID ("": by nothing).
func thing(ownerUID string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(thingGVK)
	u.SetNamespace(testNS)
	u.SetName("thing")
	if ownerUID != "" {
		u.SetOwnerReferences(controlledBy(ownerUID, "job"))
	}
	return u
}

var (
	configMapGVK = corev1.SchemeGroupVersion.WithKind("ConfigMap")
	secretGVK    = corev1.SchemeGroupVersion.WithKind("Secret")
	jobSetGVK    = jobsetv1alpha2.GroupVersion.WithKind("JobSet")
)

func trainJob(mutate ...func(*trainer.TrainJob)) *trainer.TrainJob {
	j := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "job", UID: "job-uid"}}
	for _, m := range mutate {
		m(j)
	}
	return j
}

func controlledBy(uid, name string) []metav1.OwnerReference {
	return []metav1.OwnerReference{{
		APIVersion: trainer.GroupVersion.String(), Kind: "TrainJob", Name: name, UID: types.UID(uid),
		Controller: ptr.To(true),
	}}
}

func configMapOf(name, ownerUID string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name}}
	if ownerUID != "" {
		cm.OwnerReferences = controlledBy(ownerUID, "job")
	}
	return cm
}

func podOf(name, jobSet string, phase corev1.PodPhase) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, UID: types.UID("uid-" + name)}, Status: corev1.PodStatus{Phase: phase}}
	if jobSet != "" {
		p.Labels = map[string]string{jobsetv1alpha2.JobSetNameKey: jobSet}
	}
	return p
}
