package childsync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/plan"
)

const ns = "ns"

var (
	jobSetGK    = schema.GroupKind{Group: jobsetv1alpha2.GroupVersion.Group, Kind: "JobSet"}
	configMapGK = schema.GroupKind{Kind: "ConfigMap"}
	secretGK    = schema.GroupKind{Kind: "Secret"}
	serviceGK   = schema.GroupKind{Kind: "Service"}
)

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, jobsetv1alpha2.AddToScheme, trainer.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// writeLog records every write the syncer makes, as "<verb> <Kind>/<name>",
// and fails the writes listed in fail (by the same string).
type writeLog struct {
	mu     sync.Mutex
	writes []string
	// deletes are the options of each delete, in order.
	deletes []client.DeleteOptions
	fail    map[string]error
}

func (l *writeLog) record(c client.WithWatch, verb string, obj runtime.Object) error {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	name := ""
	if o, ok := obj.(client.Object); ok {
		name = o.GetName()
		if gvk, err := c.GroupVersionKindFor(o); err == nil {
			kind = gvk.Kind
		}
	}
	entry := fmt.Sprintf("%s %s/%s", verb, kind, name)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes = append(l.writes, entry)
	return l.fail[entry]
}

func (l *writeLog) funcs() interceptor.Funcs {
	return interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := l.record(c, "create", obj); err != nil {
				return err
			}
			return c.Create(ctx, obj, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			o := client.DeleteOptions{}
			o.ApplyOptions(opts)
			l.mu.Lock()
			l.deletes = append(l.deletes, o)
			l.mu.Unlock()
			if err := l.record(c, "delete", obj); err != nil {
				return err
			}
			return c.Delete(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if err := l.record(c, "update", obj); err != nil {
				return err
			}
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			data, _ := patch.Data(obj)
			if err := l.record(c, "patch "+string(data), obj); err != nil {
				return err
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			// The fake client serves server-side apply; the log names the object
			// from the apply configuration.
			data, err := json.Marshal(obj)
			if err != nil {
				return err
			}
			var m struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if err := json.Unmarshal(data, &m); err != nil {
				return err
			}
			entry := fmt.Sprintf("apply %s/%s", m.Kind, m.Metadata.Name)
			l.mu.Lock()
			l.writes = append(l.writes, entry)
			ferr := l.fail[entry]
			l.mu.Unlock()
			if ferr != nil {
				return ferr
			}
			return c.Apply(ctx, obj, opts...)
		},
	}
}

func owner() *trainer.TrainJob {
	return &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job", UID: "owner-uid"}}
}

func otherOwner() *trainer.TrainJob {
	return &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "someone-else", UID: "other-uid"}}
}

// newSyncer returns a syncer on a fake client holding objs, and the log of
// its writes. served lists the kinds the cluster serves (nil: all).
func newSyncer(t *testing.T, fail map[string]error, served []schema.GroupKind, objs ...client.Object) (*Syncer, *writeLog) {
	t.Helper()
	log := &writeLog{fail: fail}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).WithInterceptorFuncs(log.funcs()).Build()
	s := &Syncer{Client: c, FieldOwner: "trainyard"}
	if served != nil {
		s.Served = func(gk schema.GroupKind) bool {
			for _, k := range served {
				if k == gk {
					return true
				}
			}
			return false
		}
	}
	return s, log
}

func jobSet(suspend bool, mutate ...func(*jobsetv1alpha2.JobSet)) *jobsetv1alpha2.JobSet {
	js := &jobsetv1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job"},
		Spec: jobsetv1alpha2.JobSetSpec{
			Suspend: ptr.To(suspend),
			ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{
				Name:     "node",
				Replicas: 1,
			}},
		},
	}
	js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers = []corev1.Container{{Name: "node", Image: "trainer:1"}}
	for _, m := range mutate {
		m(js)
	}
	return js
}

// existing returns js as a pass that created it for ctl left it: hashed,
// owned, with a UID.
func existing(t *testing.T, js *jobsetv1alpha2.JobSet, ctl client.Object) *jobsetv1alpha2.JobSet {
	t.Helper()
	s, _ := newSyncer(t, nil, nil)
	if err := s.own(ctl, js); err != nil {
		t.Fatal(err)
	}
	if _, err := Hashes(js); err != nil {
		t.Fatal(err)
	}
	js.UID = "js-uid"
	return js
}

func ownedBy(t *testing.T, obj, ctl client.Object) client.Object {
	t.Helper()
	s, _ := newSyncer(t, nil, nil)
	if err := s.own(ctl, obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

func nodeSelector(js *jobsetv1alpha2.JobSet) {
	js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "a100"}
}

func newImage(js *jobsetv1alpha2.JobSet) {
	js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].Image = "trainer:2"
}

func TestSyncJobSet(t *testing.T) {
	errBoom := errors.New("boom")
	cases := map[string]struct {
		// objs are in the cluster; observed is what the pass saw.
		objs           []client.Object
		observed       func(objs []client.Object) Children
		taken          func(objs []client.Object) Children
		desired        *jobsetv1alpha2.JobSet
		ownerSuspended bool
		fail           map[string]error
		wantAction     Action
		wantWrites     []string
		wantErr        error
		wantErrMsg     string
		// wantSuspend is spec.suspend of the JobSet in the cluster afterwards
		// (nil: not checked; the JobSet must then not exist when wantGone).
		wantSuspend *bool
		wantImage   string
		wantGone    bool
	}{
		"absent: created": {
			desired:     jobSet(false),
			wantAction:  Created,
			wantWrites:  []string{"create JobSet/job"},
			wantSuspend: ptr.To(false),
			wantImage:   "trainer:1",
		},
		"absent, but ours exists (cache behind): AlreadyExists, not ErrNotOwned": {
			objs:        []client.Object{existing(t, jobSet(false), owner())},
			desired:     jobSet(false),
			wantWrites:  []string{"create JobSet/job"},
			wantErrMsg:  "already exists",
			wantSuspend: ptr.To(false),
		},
		"absent, but someone else's exists: AlreadyExists, whose is for the next pass to observe": {
			objs:        []client.Object{existing(t, jobSet(false), otherOwner())},
			desired:     jobSet(false),
			wantWrites:  []string{"create JobSet/job"},
			wantErrMsg:  "already exists",
			wantSuspend: ptr.To(false),
		},
		"someone else's observed under the name: ErrNotOwned, nothing written": {
			objs:        []client.Object{existing(t, jobSet(false), otherOwner())},
			taken:       observedAll,
			desired:     jobSet(false),
			wantErr:     ErrNotOwned,
			wantSuspend: ptr.To(false),
		},
		"absent, create fails": {
			desired:    jobSet(false),
			fail:       map[string]error{"create JobSet/job": errBoom},
			wantWrites: []string{"create JobSet/job"},
			wantErr:    errBoom,
			wantGone:   true,
		},
		"running, owner running: untouched even when the rendering changed": {
			objs:        []client.Object{existing(t, jobSet(false), owner())},
			observed:    observedAll,
			desired:     jobSet(false, newImage),
			wantSuspend: ptr.To(false),
			wantImage:   "trainer:1",
		},
		"running, owner suspended: only suspend is patched": {
			objs:           []client.Object{existing(t, jobSet(false), owner())},
			observed:       observedAll,
			desired:        jobSet(true, newImage),
			ownerSuspended: true,
			wantAction:     Suspended,
			wantWrites:     []string{`patch {"spec":{"suspend":true}} JobSet/job`},
			wantSuspend:    ptr.To(true),
			wantImage:      "trainer:1",
		},
		"running, owner suspended, patch fails": {
			objs:           []client.Object{existing(t, jobSet(false), owner())},
			observed:       observedAll,
			desired:        jobSet(true),
			ownerSuspended: true,
			fail:           map[string]error{`patch {"spec":{"suspend":true}} JobSet/job`: errBoom},
			wantWrites:     []string{`patch {"spec":{"suspend":true}} JobSet/job`},
			wantErr:        errBoom,
			wantSuspend:    ptr.To(false),
		},
		"suspended, same rendering: nothing written": {
			objs:           []client.Object{existing(t, jobSet(true), owner())},
			observed:       observedAll,
			desired:        jobSet(true),
			ownerSuspended: true,
			wantSuspend:    ptr.To(true),
			wantImage:      "trainer:1",
		},
		"suspended, immutable template changed: deleted and recreated": {
			objs:           []client.Object{existing(t, jobSet(true), owner())},
			observed:       observedAll,
			desired:        jobSet(true, newImage),
			ownerSuspended: true,
			wantAction:     Recreated,
			wantWrites:     []string{"delete JobSet/job", "create JobSet/job"},
			wantSuspend:    ptr.To(true),
			wantImage:      "trainer:2",
		},
		"suspended, template changed, already gone: recreated": {
			observed: func([]client.Object) Children {
				return Children{{GroupKind: jobSetGK, Name: "job"}: existing(t, jobSet(true), owner())}
			},
			desired:     jobSet(true, newImage),
			wantAction:  Recreated,
			wantWrites:  []string{"delete JobSet/job", "create JobSet/job"},
			wantSuspend: ptr.To(true),
			wantImage:   "trainer:2",
		},
		"suspended, template changed, delete fails": {
			objs:        []client.Object{existing(t, jobSet(true), owner())},
			observed:    observedAll,
			desired:     jobSet(true, newImage),
			fail:        map[string]error{"delete JobSet/job": errBoom},
			wantWrites:  []string{"delete JobSet/job"},
			wantErr:     errBoom,
			wantSuspend: ptr.To(true),
			wantImage:   "trainer:1",
		},
		"suspended, template changed, recreate fails": {
			objs:       []client.Object{existing(t, jobSet(true), owner())},
			observed:   observedAll,
			desired:    jobSet(true, newImage),
			fail:       map[string]error{"create JobSet/job": errBoom},
			wantWrites: []string{"delete JobSet/job", "create JobSet/job"},
			wantErr:    errBoom,
			wantGone:   true,
		},
		"suspended, mutable part changed, still suspended: applied": {
			objs:           []client.Object{existing(t, jobSet(true), owner())},
			observed:       observedAll,
			desired:        jobSet(true, nodeSelector),
			ownerSuspended: true,
			wantAction:     Updated,
			wantWrites:     []string{"apply JobSet/job"},
			wantSuspend:    ptr.To(true),
			wantImage:      "trainer:1",
		},
		"suspended, resumed: applied": {
			objs:        []client.Object{existing(t, jobSet(true), owner())},
			observed:    observedAll,
			desired:     jobSet(false, nodeSelector),
			wantAction:  Resumed,
			wantWrites:  []string{"apply JobSet/job"},
			wantSuspend: ptr.To(false),
			wantImage:   "trainer:1",
		},
		"suspended, apply fails": {
			objs:        []client.Object{existing(t, jobSet(true), owner())},
			observed:    observedAll,
			desired:     jobSet(false),
			fail:        map[string]error{"apply JobSet/job": errBoom},
			wantWrites:  []string{"apply JobSet/job"},
			wantErr:     errBoom,
			wantSuspend: ptr.To(true),
		},
		"observed object of another type under the JobSet's key": {
			observed: func([]client.Object) Children {
				return Children{{GroupKind: jobSetGK, Name: "job"}: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job"}}}
			},
			desired:    jobSet(false),
			wantErrMsg: "observed *v1.ConfigMap for JobSet job",
			wantGone:   true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := make([]client.Object, 0, len(tc.objs))
			for _, o := range tc.objs {
				objs = append(objs, o.DeepCopyObject().(client.Object))
			}
			s, log := newSyncer(t, tc.fail, nil, objs...)
			var observed Children
			if tc.observed != nil {
				observed = tc.observed(readBack(t, s.Client, objs))
			}
			p := &plan.Plan{Children: []plan.Child{plan.JobSet(tc.desired)}, Suspended: tc.ownerSuspended}
			var taken Children
			if tc.taken != nil {
				taken = tc.taken(readBack(t, s.Client, objs))
			}
			res, err := s.Sync(context.Background(), owner(), p, observed, taken)
			checkErr(t, err, tc.wantErr, tc.wantErrMsg)
			if diff := cmp.Diff(tc.wantAction, res.Action(jobSetGK, "job")); diff != "" {
				t.Errorf("action (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantWrites, log.writes); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			var got jobsetv1alpha2.JobSet
			err = s.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "job"}, &got)
			if tc.wantGone {
				if !apierrors.IsNotFound(err) {
					t.Errorf("JobSet in the cluster: err %v, want NotFound", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("reading the JobSet back: %v", err)
			}
			if tc.wantSuspend != nil {
				if diff := cmp.Diff(tc.wantSuspend, got.Spec.Suspend); diff != "" {
					t.Errorf("spec.suspend in the cluster (-want +got):\n%s", diff)
				}
			}
			if tc.wantImage != "" {
				if diff := cmp.Diff(tc.wantImage, got.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].Image); diff != "" {
					t.Errorf("image in the cluster (-want +got):\n%s", diff)
				}
			}
			if tc.wantAction != None {
				if ref := metav1.GetControllerOf(&got); ref == nil || ref.UID != "owner-uid" {
					t.Errorf("controller of the JobSet = %v, want the owner", ref)
				}
				if res.Children[Key{GroupKind: jobSetGK, Name: "job"}] == nil {
					t.Errorf("result children lack the JobSet")
				}
			}
		})
	}
}

// observedAll observes every object given.
func observedAll(objs []client.Object) Children {
	out := Children{}
	for _, o := range objs {
		gvk := o.GetObjectKind().GroupVersionKind()
		out[Key{GroupKind: gvk.GroupKind(), Name: o.GetName()}] = o
	}
	return out
}

// readBack reads objs from the cluster, as a cache would hand them out.
func readBack(t *testing.T, c client.Client, objs []client.Object) []client.Object {
	t.Helper()
	var out []client.Object
	for _, o := range objs {
		cp := o.DeepCopyObject().(client.Object)
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(o), cp); err != nil {
			t.Fatal(err)
		}
		gvk, err := c.GroupVersionKindFor(cp)
		if err != nil {
			t.Fatal(err)
		}
		cp.GetObjectKind().SetGroupVersionKind(gvk)
		out = append(out, cp)
	}
	return out
}

func checkErr(t *testing.T, err, wantErr error, wantMsg string) {
	t.Helper()
	switch {
	case wantErr == nil && wantMsg == "":
		if err != nil {
			t.Fatalf("Sync: unexpected error %v", err)
		}
	case err == nil:
		t.Fatalf("Sync: no error, want %v %q", wantErr, wantMsg)
	default:
		if wantErr != nil && !errors.Is(err, wantErr) {
			t.Errorf("Sync error %v, want one wrapping %v", err, wantErr)
		}
		if wantMsg != "" && !strings.Contains(err.Error(), wantMsg) {
			t.Errorf("Sync error %q, want it to contain %q", err, wantMsg)
		}
	}
}

// A recreated JobSet is deleted in the background with a UID precondition,
// so that a JobSet recreated by someone else in between is never deleted.
func TestRecreateDeletesByUID(t *testing.T) {
	old := existing(t, jobSet(true), owner())
	s, log := newSyncer(t, nil, nil, old.DeepCopy())
	observed := Children{{GroupKind: jobSetGK, Name: "job"}: old}
	p := &plan.Plan{Children: []plan.Child{plan.JobSet(jobSet(true, newImage))}, Suspended: true}
	if _, err := s.Sync(context.Background(), owner(), p, observed, nil); err != nil {
		t.Fatal(err)
	}
	if len(log.deletes) != 1 {
		t.Fatalf("deletes = %d, want 1", len(log.deletes))
	}
	d := log.deletes[0]
	if diff := cmp.Diff(ptr.To(metav1.DeletePropagationBackground), d.PropagationPolicy); diff != "" {
		t.Errorf("propagation (-want +got):\n%s", diff)
	}
	if d.Preconditions == nil || d.Preconditions.UID == nil || *d.Preconditions.UID != "js-uid" {
		t.Errorf("preconditions = %+v, want UID js-uid", d.Preconditions)
	}
}

func TestHashes(t *testing.T) {
	base := jobSet(true)
	baseRender, err := Hashes(base)
	if err != nil {
		t.Fatal(err)
	}
	baseTmpl := base.Annotations[TemplateHashAnnotation]
	cases := map[string]struct {
		mutate       func(*jobsetv1alpha2.JobSet)
		sameTemplate bool
		sameRender   bool
	}{
		"nothing":         {func(*jobsetv1alpha2.JobSet) {}, true, true},
		"suspend":         {func(js *jobsetv1alpha2.JobSet) { js.Spec.Suspend = ptr.To(false) }, true, false},
		"node selector":   {nodeSelector, true, false},
		"tolerations":     {func(js *jobsetv1alpha2.JobSet) { pod(js).Tolerations = []corev1.Toleration{{Key: "gpu"}} }, true, false},
		"scheduling gate": {func(js *jobsetv1alpha2.JobSet) { pod(js).SchedulingGates = []corev1.PodSchedulingGate{{Name: "g"}} }, true, false},
		"pod labels": {func(js *jobsetv1alpha2.JobSet) {
			js.Spec.ReplicatedJobs[0].Template.Spec.Template.Labels = map[string]string{"a": "b"}
		}, true, false},
		"JobSet label":    {func(js *jobsetv1alpha2.JobSet) { js.Labels = map[string]string{"a": "b"} }, true, false},
		"image":           {newImage, false, false},
		"replicas":        {func(js *jobsetv1alpha2.JobSet) { js.Spec.ReplicatedJobs[0].Replicas = 2 }, false, false},
		"old render hash": {func(js *jobsetv1alpha2.JobSet) { js.Annotations = map[string]string{RenderHashAnnotation: "stale"} }, true, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			js := jobSet(true)
			tc.mutate(js)
			render, err := Hashes(js)
			if err != nil {
				t.Fatal(err)
			}
			if render != js.Annotations[RenderHashAnnotation] {
				t.Errorf("returned hash %q, annotation %q", render, js.Annotations[RenderHashAnnotation])
			}
			if got := js.Annotations[TemplateHashAnnotation] == baseTmpl; got != tc.sameTemplate {
				t.Errorf("same template hash = %v, want %v", got, tc.sameTemplate)
			}
			if got := render == baseRender; got != tc.sameRender {
				t.Errorf("same render hash = %v, want %v", got, tc.sameRender)
			}
			again, _ := Hashes(js)
			if again != render {
				t.Errorf("hashing twice: %q then %q", render, again)
			}
		})
	}
}

func pod(js *jobsetv1alpha2.JobSet) *corev1.PodSpec {
	return &js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec
}

func secret(name string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{"key": []byte("private")}}
}

func TestCreateOnce(t *testing.T) {
	errBoom := errors.New("boom")
	cases := map[string]struct {
		objs       []client.Object
		observed   bool
		taken      bool // the objects are observed as taken names
		fail       map[string]error
		wantAction Action
		wantWrites []string
		wantChild  bool
		wantErr    error
		wantErrMsg string
	}{
		"absent: created": {
			wantAction: Created,
			wantWrites: []string{"create Secret/ssh"},
			wantChild:  true,
		},
		"present: never updated": {
			objs:      []client.Object{ownedBy(t, secret("ssh"), owner())},
			observed:  true,
			wantChild: true,
		},
		// Whose it is, the next pass observes (the syncer reads nothing).
		"absent from the cache, exists and ours: AlreadyExists": {
			objs:       []client.Object{ownedBy(t, secret("ssh"), owner())},
			wantWrites: []string{"create Secret/ssh"},
			wantErrMsg: "already exists",
		},
		"absent from the cache, exists and not ours: AlreadyExists": {
			objs:       []client.Object{ownedBy(t, secret("ssh"), otherOwner())},
			wantWrites: []string{"create Secret/ssh"},
			wantErrMsg: "already exists",
		},
		"observed as taken, not ours: ErrNotOwned, nothing written": {
			objs:    []client.Object{ownedBy(t, secret("ssh"), otherOwner())},
			taken:   true,
			wantErr: ErrNotOwned,
		},
		"observed as taken, without owner: ErrNotOwned": {
			objs:    []client.Object{secret("ssh")},
			taken:   true,
			wantErr: ErrNotOwned,
		},
		"create fails": {
			fail:       map[string]error{"create Secret/ssh": errBoom},
			wantWrites: []string{"create Secret/ssh"},
			wantErr:    errBoom,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, log := newSyncer(t, tc.fail, nil, tc.objs...)
			var observed Children
			if tc.observed {
				observed = observedAll(readBack(t, s.Client, tc.objs))
			}
			var taken Children
			if tc.taken {
				taken = observedAll(readBack(t, s.Client, tc.objs))
			}
			p := &plan.Plan{Children: []plan.Child{plan.CreateOnce(secret("ssh"))}}
			res, err := s.Sync(context.Background(), owner(), p, observed, taken)
			checkErr(t, err, tc.wantErr, tc.wantErrMsg)
			if diff := cmp.Diff(tc.wantAction, res.Action(secretGK, "ssh")); diff != "" {
				t.Errorf("action (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantWrites, log.writes); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			if got := res.Children[Key{GroupKind: secretGK, Name: "ssh"}] != nil; got != tc.wantChild {
				t.Errorf("result has the child = %v, want %v", got, tc.wantChild)
			}
		})
	}
}

// TestCreateOnceBeforeCreate: the hook fills the object only when the syncer
// creates it; its content is what gets stored, and a failing hook writes nothing.
func TestCreateOnceBeforeCreate(t *testing.T) {
	errBoom := errors.New("boom")
	cases := map[string]struct {
		objs       []client.Object
		observed   bool
		hookErr    error
		wantCalls  int
		wantWrites []string
		wantData   map[string][]byte
		wantErr    error
	}{
		"absent: filled, then created": {
			wantCalls:  1,
			wantWrites: []string{"create Secret/ssh"},
			wantData:   map[string][]byte{"key": []byte("made once")},
		},
		"present: never called": {
			objs:     []client.Object{ownedBy(t, secret("ssh"), owner())},
			observed: true,
		},
		"hook fails: nothing written": {
			hookErr:   errBoom,
			wantCalls: 1,
			wantErr:   errBoom,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, log := newSyncer(t, nil, nil, tc.objs...)
			var observed Children
			if tc.observed {
				observed = observedAll(readBack(t, s.Client, tc.objs))
			}
			calls := 0
			fill := func(obj client.Object) error {
				calls++
				if tc.hookErr != nil {
					return tc.hookErr
				}
				obj.(*corev1.Secret).Data = map[string][]byte{"key": []byte("made once")}
				return nil
			}
			p := &plan.Plan{Children: []plan.Child{plan.CreateOnceWith(secret("ssh"), fill)}}
			_, err := s.Sync(context.Background(), owner(), p, observed, nil)
			checkErr(t, err, tc.wantErr, "")
			if calls != tc.wantCalls {
				t.Errorf("BeforeCreate called %d times, want %d", calls, tc.wantCalls)
			}
			if diff := cmp.Diff(tc.wantWrites, log.writes); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			if tc.wantData != nil {
				got := &corev1.Secret{}
				if err := s.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "ssh"}, got); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.wantData, got.Data); diff != "" {
					t.Errorf("stored data (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func configMap(data string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hosts"}, Data: map[string]string{"hostfile": data}}
}

// applied returns the ConfigMap a pass that applied cm for owner left behind.
func applied(t *testing.T, cm *corev1.ConfigMap) *corev1.ConfigMap {
	t.Helper()
	s, _ := newSyncer(t, nil, nil)
	p := &plan.Plan{Children: []plan.Child{plan.Apply(cm)}}
	if _, err := s.Sync(context.Background(), owner(), p, nil, nil); err != nil {
		t.Fatal(err)
	}
	return cm
}

func TestApply(t *testing.T) {
	errBoom := errors.New("boom")
	cases := map[string]struct {
		objs       []client.Object
		observed   bool
		taken      bool // the objects are observed as taken names
		desired    *corev1.ConfigMap
		fail       map[string]error
		wantAction Action
		wantWrites []string
		wantData   string
		wantErr    error
		wantErrMsg string
	}{
		"absent: created": {
			desired:    configMap("a b"),
			wantAction: Created,
			wantWrites: []string{"create ConfigMap/hosts"},
			wantData:   "a b",
		},
		"unchanged: nothing written": {
			objs:     []client.Object{applied(t, configMap("a b"))},
			observed: true,
			desired:  configMap("a b"),
			wantData: "a b",
		},
		"changed: applied": {
			objs:       []client.Object{applied(t, configMap("a b"))},
			observed:   true,
			desired:    configMap("a b c"),
			wantAction: Updated,
			wantWrites: []string{"apply ConfigMap/hosts"},
			wantData:   "a b c",
		},
		"a desired object whose only annotation is an old hash: nothing written": {
			objs:     []client.Object{applied(t, configMap("a b"))},
			observed: true,
			desired: func() *corev1.ConfigMap {
				cm := configMap("a b")
				cm.Annotations = map[string]string{RenderHashAnnotation: "stale"}
				return cm
			}(),
			wantData: "a b",
		},
		"an old hash on the desired object is not part of the hash": {
			objs: []client.Object{applied(t, func() *corev1.ConfigMap {
				cm := configMap("a b")
				cm.Annotations = map[string]string{"note": "x"}
				return cm
			}())},
			observed: true,
			desired: func() *corev1.ConfigMap {
				cm := configMap("a b")
				cm.Annotations = map[string]string{"note": "x", RenderHashAnnotation: "stale"}
				return cm
			}(),
			wantData: "a b",
		},
		"changed, apply fails": {
			objs:       []client.Object{applied(t, configMap("a b"))},
			observed:   true,
			desired:    configMap("a b c"),
			fail:       map[string]error{"apply ConfigMap/hosts": errBoom},
			wantWrites: []string{"apply ConfigMap/hosts"},
			wantData:   "a b",
			wantErr:    errBoom,
		},
		"absent from the cache, someone else's exists: AlreadyExists": {
			objs:       []client.Object{ownedBy(t, configMap("theirs"), otherOwner())},
			desired:    configMap("a b"),
			wantWrites: []string{"create ConfigMap/hosts"},
			wantData:   "theirs",
			wantErrMsg: "already exists",
		},
		"someone else's observed as taken: ErrNotOwned, nothing written": {
			objs:     []client.Object{ownedBy(t, configMap("theirs"), otherOwner())},
			taken:    true,
			desired:  configMap("a b"),
			wantData: "theirs",
			wantErr:  ErrNotOwned,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := make([]client.Object, 0, len(tc.objs))
			for _, o := range tc.objs {
				objs = append(objs, o.DeepCopyObject().(client.Object))
			}
			s, log := newSyncer(t, tc.fail, nil, objs...)
			var observed Children
			if tc.observed {
				observed = observedAll(readBack(t, s.Client, objs))
			}
			var taken Children
			if tc.taken {
				taken = observedAll(readBack(t, s.Client, objs))
			}
			p := &plan.Plan{Children: []plan.Child{plan.Apply(tc.desired)}}
			res, err := s.Sync(context.Background(), owner(), p, observed, taken)
			checkErr(t, err, tc.wantErr, tc.wantErrMsg)
			if diff := cmp.Diff(tc.wantAction, res.Action(configMapGK, "hosts")); diff != "" {
				t.Errorf("action (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantWrites, log.writes); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			if h := tc.desired.Annotations[RenderHashAnnotation]; !errors.Is(err, ErrNotOwned) && (h == "" || h == "stale") {
				t.Errorf("desired render hash = %q, want a hash", tc.desired.Annotations[RenderHashAnnotation])
			}
			var got corev1.ConfigMap
			if err := s.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "hosts"}, &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantData, got.Data["hostfile"]); diff != "" {
				t.Errorf("data in the cluster (-want +got):\n%s", diff)
			}
			if tc.wantAction != None {
				if diff := cmp.Diff(tc.desired.Annotations[RenderHashAnnotation], got.Annotations[RenderHashAnnotation]); diff != "" {
					t.Errorf("render hash in the cluster (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// Every child the syncer writes is controlled by the owner and labelled as
// Trainyard's; labels the plan set are kept.
func TestSyncOwnsChildren(t *testing.T) {
	s, _ := newSyncer(t, nil, nil)
	cm := configMap("a")
	cm.Labels = map[string]string{"app": "x"}
	p := &plan.Plan{Children: []plan.Child{plan.Apply(cm), plan.CreateOnce(secret("ssh")), plan.JobSet(jobSet(false))}}
	res, err := s.Sync(context.Background(), owner(), p, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantActions := map[Key]Action{
		{GroupKind: configMapGK, Name: "hosts"}: Created,
		{GroupKind: secretGK, Name: "ssh"}:      Created,
		{GroupKind: jobSetGK, Name: "job"}:      Created,
	}
	if diff := cmp.Diff(wantActions, res.Actions); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
	wantRef := []metav1.OwnerReference{{
		APIVersion: trainer.GroupVersion.String(), Kind: "TrainJob", Name: "job", UID: "owner-uid",
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}}
	for _, obj := range []client.Object{&corev1.ConfigMap{}, &corev1.Secret{}, &jobsetv1alpha2.JobSet{}} {
		name := map[string]string{"*v1.ConfigMap": "hosts", "*v1.Secret": "ssh", "*v1alpha2.JobSet": "job"}[fmt.Sprintf("%T", obj)]
		if err := s.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(wantRef, obj.GetOwnerReferences()); diff != "" {
			t.Errorf("%T owner references (-want +got):\n%s", obj, diff)
		}
		if got := obj.GetLabels()[ManagedByLabel]; got != ManagedBy {
			t.Errorf("%T %s = %q, want %q", obj, ManagedByLabel, got, ManagedBy)
		}
	}
	if diff := cmp.Diff(map[string]string{"app": "x", ManagedByLabel: ManagedBy}, cm.Labels); diff != "" {
		t.Errorf("ConfigMap labels (-want +got):\n%s", diff)
	}
}

func TestSyncErrors(t *testing.T) {
	errBoom := errors.New("boom")
	notInScheme := &unregistered{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "x"}}
	controlled := ownedBy(t, configMap("a"), otherOwner())
	cases := map[string]struct {
		children []plan.Child
		observed Children
		served   []schema.GroupKind
		fail     map[string]error
		// wantWrites are the writes made before the error (none for errors
		// found before the first write).
		wantWrites   []string
		wantActions  map[Key]Action
		wantChildren []Key
		wantErr      error
		wantErrMsg   string
	}{
		"kind not served: nothing written, not even the children before it": {
			children: []plan.Child{plan.Apply(configMap("a")), plan.CreateOnce(secret("ssh")), plan.JobSet(jobSet(false))},
			served:   []schema.GroupKind{configMapGK, secretGK},
			wantErr:  ErrKindNotServed,
			// The message names the owner, its kind and the missing kind.
			wantErrMsg:  "TrainJob job needs JobSet.jobset.x-k8s.io",
			wantActions: map[Key]Action{},
		},
		"every kind served": {
			children:   []plan.Child{plan.Apply(configMap("a")), plan.JobSet(jobSet(false))},
			served:     []schema.GroupKind{configMapGK, jobSetGK},
			wantWrites: []string{"create ConfigMap/hosts", "create JobSet/job"},
			wantActions: map[Key]Action{
				{GroupKind: configMapGK, Name: "hosts"}: Created,
				{GroupKind: jobSetGK, Name: "job"}:      Created,
			},
			wantChildren: []Key{{GroupKind: configMapGK, Name: "hosts"}, {GroupKind: jobSetGK, Name: "job"}},
		},
		"kind not in the scheme: nothing written": {
			children:    []plan.Child{plan.Apply(configMap("a")), plan.Apply(notInScheme)},
			wantErrMsg:  "kind of *childsync.unregistered",
			wantActions: map[Key]Action{},
		},
		"unknown rule: stops there": {
			children:   []plan.Child{plan.Apply(configMap("a")), {Object: secret("ssh"), Rule: "Sometimes"}, plan.JobSet(jobSet(false))},
			wantWrites: []string{"create ConfigMap/hosts"},
			wantActions: map[Key]Action{
				{GroupKind: configMapGK, Name: "hosts"}: Created,
			},
			wantChildren: []Key{{GroupKind: configMapGK, Name: "hosts"}},
			wantErrMsg:   `unknown plan rule "Sometimes" for Secret/ssh`,
		},
		"JobSet rule on another kind": {
			children:    []plan.Child{{Object: secret("ssh"), Rule: plan.RuleJobSet}},
			wantErrMsg:  "plan rule JobSet on a *v1.Secret",
			wantActions: map[Key]Action{},
		},
		"a failed child stops the later ones": {
			children:    []plan.Child{plan.Apply(configMap("a")), plan.JobSet(jobSet(false))},
			fail:        map[string]error{"create ConfigMap/hosts": errBoom},
			wantWrites:  []string{"create ConfigMap/hosts"},
			wantErr:     errBoom,
			wantActions: map[Key]Action{},
		},
		"a child controlled by someone else cannot be owned": {
			children:    []plan.Child{plan.Apply(controlled)},
			wantErrMsg:  "setting owner of hosts",
			wantActions: map[Key]Action{},
		},
		"observed children are kept in the result": {
			children:   []plan.Child{plan.CreateOnce(secret("ssh"))},
			observed:   Children{{GroupKind: serviceGK, Name: "svc"}: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "svc"}}},
			wantWrites: []string{"create Secret/ssh"},
			wantActions: map[Key]Action{
				{GroupKind: secretGK, Name: "ssh"}: Created,
			},
			wantChildren: []Key{{GroupKind: secretGK, Name: "ssh"}, {GroupKind: serviceGK, Name: "svc"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, log := newSyncer(t, tc.fail, tc.served)
			res, err := s.Sync(context.Background(), owner(), &plan.Plan{Children: tc.children}, tc.observed, nil)
			checkErr(t, err, tc.wantErr, tc.wantErrMsg)
			if diff := cmp.Diff(tc.wantWrites, log.writes); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantActions, res.Actions); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			var keys []Key
			for k := range res.Children {
				keys = append(keys, k)
			}
			less := func(a, b Key) bool { return a.String() < b.String() }
			if diff := cmp.Diff(tc.wantChildren, keys, cmpopts.SortSlices(less)); diff != "" {
				t.Errorf("result children (-want +got):\n%s", diff)
			}
		})
	}
}

// The message of ErrKindNotServed names the owner's kind from its TypeMeta,
// from the scheme, or from its Go type when the scheme does not know it.
func TestKindNotServedMessage(t *testing.T) {
	typed := owner()
	typed.Kind = "SomeKind"
	cases := map[string]struct {
		owner client.Object
		want  string
	}{
		"TypeMeta":        {typed, "SomeKind job needs"},
		"scheme":          {owner(), "TrainJob job needs"},
		"unknown to both": {&unregistered{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job"}}, "*childsync.unregistered job needs"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, log := newSyncer(t, nil, []schema.GroupKind{})
			_, err := s.Sync(context.Background(), tc.owner, &plan.Plan{Children: []plan.Child{plan.Apply(configMap("a"))}}, nil, nil)
			checkErr(t, err, ErrKindNotServed, tc.want)
			if len(log.writes) != 0 {
				t.Errorf("writes = %v, want none", log.writes)
			}
		})
	}
}

func TestKeyOf(t *testing.T) {
	s, _ := newSyncer(t, nil, nil)
	cases := map[string]struct {
		obj        client.Object
		want       Key
		wantString string
		wantErr    bool
	}{
		"core kind":         {obj: configMap("a"), want: Key{GroupKind: configMapGK, Name: "hosts"}, wantString: "ConfigMap/hosts"},
		"JobSet":            {obj: jobSet(false), want: Key{GroupKind: jobSetGK, Name: "job"}, wantString: "JobSet.jobset.x-k8s.io/job"},
		"TrainJob":          {obj: owner(), want: Key{GroupKind: schema.GroupKind{Group: trainer.GroupVersion.Group, Kind: "TrainJob"}, Name: "job"}, wantString: "TrainJob.trainer.kubeflow.org/job"},
		"not in the scheme": {obj: &unregistered{}, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := s.KeyOf(tc.obj)
			if (err != nil) != tc.wantErr {
				t.Fatalf("KeyOf error %v, want error %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("KeyOf (-want +got):\n%s", diff)
			}
			if tc.wantString != "" {
				if diff := cmp.Diff(tc.wantString, got.String()); diff != "" {
					t.Errorf("String (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestToUnstructured(t *testing.T) {
	cm := configMap("a")
	cm.ResourceVersion = "7"
	cm.CreationTimestamp = metav1.Now()
	cm.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "m"}}
	cm.UID = "u"
	cases := map[string]struct {
		obj  runtime.Object
		want map[string]any
	}{
		"server-set metadata dropped": {
			obj: cm,
			want: map[string]any{
				"metadata": map[string]any{"namespace": ns, "name": "hosts", "uid": "u"},
				"data":     map[string]any{"hostfile": "a"},
			},
		},
		"status dropped": {
			obj: &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "j"}, Status: jobsetv1alpha2.JobSetStatus{Restarts: 3}},
			want: map[string]any{
				"metadata": map[string]any{"name": "j"},
				"spec":     map[string]any{},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			u, err := ToUnstructured(tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, u.Object); diff != "" {
				t.Errorf("ToUnstructured (-want +got):\n%s", diff)
			}
		})
	}
}

// unregistered is an object kind no scheme knows.
type unregistered struct {
	metav1.TypeMeta
	metav1.ObjectMeta
}

func (u *unregistered) DeepCopyObject() runtime.Object {
	out := *u
	u.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// A PodGroup-like child is created when absent whatever the owner's state,
// kept in line while the owner is suspended, and never changed once it runs.
func TestApplyWhileSuspended(t *testing.T) {
	cases := map[string]struct {
		existing   *corev1.ConfigMap
		suspended  bool
		desired    *corev1.ConfigMap
		wantAction Action
		wantWrites []string
		wantData   string
	}{
		"absent, owner running: created": {
			desired:    configMap("a b"),
			wantAction: Created,
			wantWrites: []string{"create ConfigMap/hosts"},
			wantData:   "a b",
		},
		"absent, owner suspended: created": {
			suspended:  true,
			desired:    configMap("a b"),
			wantAction: Created,
			wantWrites: []string{"create ConfigMap/hosts"},
			wantData:   "a b",
		},
		"changed, owner suspended: applied": {
			existing:   configMap("a b"),
			suspended:  true,
			desired:    configMap("a b c"),
			wantAction: Updated,
			wantWrites: []string{"apply ConfigMap/hosts"},
			wantData:   "a b c",
		},
		"unchanged, owner suspended: nothing written": {
			existing:  configMap("a b"),
			suspended: true,
			desired:   configMap("a b"),
			wantData:  "a b",
		},
		"changed, owner running: left alone": {
			existing: configMap("a b"),
			desired:  configMap("a b c"),
			wantData: "a b",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var objs []client.Object
			if tc.existing != nil {
				objs = append(objs, applied(t, tc.existing))
			}
			s, log := newSyncer(t, nil, nil, objs...)
			var observed Children
			if tc.existing != nil {
				observed = observedAll(readBack(t, s.Client, objs))
			}
			p := &plan.Plan{Children: []plan.Child{plan.ApplyWhileSuspended(tc.desired)}, Suspended: tc.suspended}
			res, err := s.Sync(context.Background(), owner(), p, observed, nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantAction, res.Action(configMapGK, "hosts")); diff != "" {
				t.Errorf("action (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantWrites, log.writes); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			var got corev1.ConfigMap
			if err := s.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "hosts"}, &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantData, got.Data["hostfile"]); diff != "" {
				t.Errorf("data in the cluster (-want +got):\n%s", diff)
			}
			if res.Children[Key{GroupKind: configMapGK, Name: "hosts"}] == nil {
				t.Errorf("result has no child hosts")
			}
		})
	}
}
