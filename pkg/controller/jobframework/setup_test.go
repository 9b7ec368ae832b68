package jobframework

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/childsync"
)

// fakeManager is the part of a manager that served, indexOnce and the start
// of SetupWithManager use; anything else panics (nil embedded Manager).
type fakeManager struct {
	ctrl.Manager
	mapper  apimeta.RESTMapper
	client  client.Client
	indexer *fakeIndexer
}

func (m *fakeManager) GetRESTMapper() apimeta.RESTMapper    { return m.mapper }
func (m *fakeManager) GetClient() client.Client             { return m.client }
func (m *fakeManager) GetScheme() *runtime.Scheme           { return m.client.Scheme() }
func (m *fakeManager) GetFieldIndexer() client.FieldIndexer { return m.indexer }

// No REST config: the reconciler writes through the (fake) client.
func (m *fakeManager) GetConfig() *rest.Config     { return nil }
func (m *fakeManager) GetHTTPClient() *http.Client { return nil }

type fakeIndexer struct {
	calls []string
	err   error
}

func (f *fakeIndexer) IndexField(_ context.Context, obj client.Object, field string, _ client.IndexerFunc) error {
	f.calls = append(f.calls, fmt.Sprintf("%T %s", obj, field))
	return f.err
}

// failingMapper fails every lookup with an error other than "no match".
type failingMapper struct{ apimeta.RESTMapper }

func (failingMapper) RESTMapping(schema.GroupKind, ...string) (*apimeta.RESTMapping, error) {
	return nil, errBoom
}

func newFakeManager(t *testing.T, served ...schema.GroupVersionKind) *fakeManager {
	t.Helper()
	m := apimeta.NewDefaultRESTMapper(nil)
	for _, gvk := range served {
		m.Add(gvk, apimeta.RESTScopeNamespace)
	}
	return &fakeManager{
		mapper:  m,
		client:  fake.NewClientBuilder().WithScheme(testScheme(t)).Build(),
		indexer: &fakeIndexer{},
	}
}

func TestServed(t *testing.T) {
	workload := kueue.GroupVersion.WithKind("Workload")
	cases := map[string]struct {
		mgr     func(t *testing.T) *fakeManager
		gvk     schema.GroupVersionKind
		want    bool
		wantErr error
	}{
		"served": {
			mgr: func(t *testing.T) *fakeManager { return newFakeManager(t, jobSetGVK) },
			gvk: jobSetGVK, want: true,
		},
		"not served": {
			mgr: func(t *testing.T) *fakeManager { return newFakeManager(t, jobSetGVK) },
			gvk: workload,
		},
		"lookup fails": {
			mgr: func(t *testing.T) *fakeManager {
				m := newFakeManager(t)
				m.mapper = failingMapper{m.mapper}
				return m
			},
			gvk: workload, wantErr: errBoom,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := served(tc.mgr(t), tc.gvk)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("served error %v, want %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("served = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestIndexOnce(t *testing.T) {
	m1, m2 := newFakeManager(t), newFakeManager(t)
	w1, w2 := NewManager(m1, nil), NewManager(m2, nil)
	for range 2 {
		if err := w1.indexOnce(&corev1.Pod{}, podJobSetIndex, jobSetName); err != nil {
			t.Fatal(err)
		}
	}
	if err := w1.indexOnce(&corev1.ConfigMap{}, ownerIndex, controllerUID); err != nil {
		t.Fatal(err)
	}
	// Another manager has its own indexes.
	if err := w2.indexOnce(&corev1.Pod{}, podJobSetIndex, jobSetName); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"*v1.Pod " + podJobSetIndex, "*v1.ConfigMap " + ownerIndex}, m1.indexer.calls); diff != "" {
		t.Errorf("first manager's indexes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"*v1.Pod " + podJobSetIndex}, m2.indexer.calls); diff != "" {
		t.Errorf("second manager's indexes (-want +got):\n%s", diff)
	}

	// A failed registration is tried again.
	m3 := newFakeManager(t)
	m3.indexer.err = errBoom
	w3 := NewManager(m3, nil)
	if err := w3.indexOnce(&corev1.Pod{}, podJobSetIndex, jobSetName); !errors.Is(err, errBoom) {
		t.Fatalf("indexOnce error %v, want %v", err, errBoom)
	}
	m3.indexer.err = nil
	if err := w3.indexOnce(&corev1.Pod{}, podJobSetIndex, jobSetName); err != nil {
		t.Fatal(err)
	}
	if got := len(m3.indexer.calls); got != 2 {
		t.Errorf("IndexField calls = %d, want 2", got)
	}

	// A kind the scheme does not know cannot be indexed.
	if err := w3.indexOnce(&unknownKind{}, ownerIndex, controllerUID); err == nil {
		t.Error("indexOnce of an unknown kind: no error")
	}
}

// unknownKind is an object kind no scheme knows.
type unknownKind struct {
	metav1.TypeMeta
	metav1.ObjectMeta
}

func (u *unknownKind) DeepCopyObject() runtime.Object { c := *u; return &c }

// SetupWithManager fails before it builds the controller when the cluster's
// API cannot be read or a child kind is unknown.
func TestSetupWithManagerErrors(t *testing.T) {
	cases := map[string]struct {
		mgr     func(t *testing.T) *fakeManager
		owns    []client.Object
		wantErr string
	}{
		"Kueue lookup fails": {
			mgr: func(t *testing.T) *fakeManager {
				m := newFakeManager(t)
				m.mapper = failingMapper{m.mapper}
				return m
			},
			wantErr: "looking up kueue.x-k8s.io/v1beta2, Kind=Workload",
		},
		"child kind unknown to the scheme": {
			mgr:     func(t *testing.T) *fakeManager { return newFakeManager(t) },
			owns:    []client.Object{&unknownKind{}},
			wantErr: "kind of *jobframework.unknownKind",
		},
		"child kind lookup fails": {
			mgr: func(t *testing.T) *fakeManager {
				m := newFakeManager(t)
				m.mapper = &failFor{RESTMapper: m.mapper, kind: "ConfigMap"}
				return m
			},
			owns:    []client.Object{&corev1.ConfigMap{}},
			wantErr: "looking up /v1, Kind=ConfigMap",
		},
		"indexing a child kind fails": {
			mgr: func(t *testing.T) *fakeManager {
				m := newFakeManager(t, configMapGVK)
				m.indexer.err = errBoom
				return m
			},
			owns:    []client.Object{&corev1.ConfigMap{}},
			wantErr: "indexing ConfigMap by owner",
		},
		"indexing pods fails": {
			mgr: func(t *testing.T) *fakeManager {
				m := newFakeManager(t)
				m.indexer.err = errBoom
				return m
			},
			owns:    []client.Object{&corev1.Secret{}}, // not served: skipped
			wantErr: "indexing pods by JobSet",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := SetupWithManager(NewManager(tc.mgr(t), nil), Config{Adapter: &fakeAdapter{}, Owns: tc.owns, Name: "test"})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("SetupWithManager error %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// failFor fails the lookup of one kind, and says "no match" for the others.
type failFor struct {
	apimeta.RESTMapper
	kind string
}

func (f *failFor) RESTMapping(gk schema.GroupKind, versions ...string) (*apimeta.RESTMapping, error) {
	if gk.Kind == f.kind {
		return nil, errBoom
	}
	return f.RESTMapper.RESTMapping(gk, versions...)
}

func TestPodToJob(t *testing.T) {
	cases := map[string]struct {
		pod  *corev1.Pod
		want []reconcile.Request
	}{
		"JobSet pod": {podOf("job-node-0-0", "job", corev1.PodRunning), []reconcile.Request{{NamespacedName: key(testNS, "job")}}},
		"other pod":  {podOf("stray", "", corev1.PodRunning), nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, PodToJob(context.Background(), tc.pod)); diff != "" {
				t.Errorf("PodToJob (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWorkloadToJob(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).Build()
	mapFn := WorkloadToJob(c, &trainer.TrainJob{})
	ref := func(apiVersion, kind, name string) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name}
	}
	cases := map[string]struct {
		refs []metav1.OwnerReference
		want []reconcile.Request
	}{
		"owned by the job": {
			refs: []metav1.OwnerReference{ref(trainer.GroupVersion.String(), "TrainJob", "job")},
			want: []reconcile.Request{{NamespacedName: key(testNS, "job")}},
		},
		"owned by its JobSet": {
			refs: []metav1.OwnerReference{ref(jobsetv1alpha2.GroupVersion.String(), "JobSet", "job")},
			want: []reconcile.Request{{NamespacedName: key(testNS, "job")}},
		},
		"first matching owner wins": {
			refs: []metav1.OwnerReference{ref("batch/v1", "Job", "batch"), ref(trainer.GroupVersion.String(), "TrainJob", "job"), ref(jobsetv1alpha2.GroupVersion.String(), "JobSet", "other")},
			want: []reconcile.Request{{NamespacedName: key(testNS, "job")}},
		},
		"same kind, other group": {
			refs: []metav1.OwnerReference{ref("example.com/v1", "TrainJob", "job"), ref("example.com/v1", "JobSet", "job")},
		},
		"no owner": {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := workloadOf("wl", "")
			w.OwnerReferences = tc.refs
			if diff := cmp.Diff(tc.want, mapFn(context.Background(), w)); diff != "" {
				t.Errorf("WorkloadToJob (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCacheOptions(t *testing.T) {
	opts := CacheOptions([]client.Object{&corev1.ConfigMap{}, &jobsetv1alpha2.JobSet{}, &corev1.Service{}})
	if opts.DefaultTransform == nil {
		t.Error("no default transform")
	}
	type entry struct {
		Label        string
		HasTransform bool
	}
	got := map[string]entry{}
	for o, b := range opts.ByObject {
		e := entry{HasTransform: b.Transform != nil}
		if b.Label != nil {
			e.Label = b.Label.String()
		}
		got[fmt.Sprintf("%T", o)] = e
	}
	managed := labels.Set{childsync.ManagedByLabel: childsync.ManagedBy}.String()
	want := map[string]entry{
		"*v1.Pod":          {Label: jobsetv1alpha2.JobSetNameKey, HasTransform: true},
		"*v1alpha2.JobSet": {HasTransform: true}, // every one: older JobSets carry no label
		"*v1.ConfigMap":    {Label: managed, HasTransform: true},
		"*v1.Service":      {Label: managed, HasTransform: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cache options by object (-want +got):\n%s", diff)
	}
}

// TestCacheOptionsKeepJobsWhole: a child kind that is also a kind's job
// (an OptimizationJob's TrainJobs) is cached whole, not only the children
// Trainyard labelled: the TrainJob controller must see every TrainJob.
func TestCacheOptionsKeepJobsWhole(t *testing.T) {
	owned := []client.Object{&corev1.ConfigMap{}, &trainer.TrainJob{}}
	if _, filtered := CacheOptions(owned).ByObject[owned[1]]; !filtered {
		t.Fatal("without jobs, a TrainJob child kind is narrowed to labelled objects: the test cannot tell")
	}
	opts := CacheOptions(owned, &trainer.TrainJob{})
	if b, ok := opts.ByObject[owned[1]]; ok {
		t.Errorf("TrainJobs, children and jobs, cached with label selector %v: want them whole", b.Label)
	}
	if b := opts.ByObject[owned[0]]; b.Label == nil {
		t.Error("ConfigMaps lost their label selector")
	}
}

func TestStripPod(t *testing.T) {
	now := metav1.Now()
	full := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "p", Namespace: testNS, UID: "u", ResourceVersion: "3",
			Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"big": "yes"},
			DeletionTimestamp: &now, CreationTimestamp: now,
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}},
		Status: corev1.PodStatus{
			Phase:                 corev1.PodRunning,
			Conditions:            []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses:     []corev1.ContainerStatus{{Name: "c", Ready: true}},
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "init"}},
			Reason:                "r", Message: "m",
			PodIP: "10.0.0.1", HostIP: "10.0.0.2",
		},
	}
	want := &corev1.Pod{
		TypeMeta: full.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: "p", Namespace: testNS, UID: "u", ResourceVersion: "3",
			Labels: map[string]string{"a": "b"}, DeletionTimestamp: &now, CreationTimestamp: now,
		},
		Status: corev1.PodStatus{
			Phase:                 corev1.PodRunning,
			Conditions:            full.Status.Conditions,
			ContainerStatuses:     full.Status.ContainerStatuses,
			InitContainerStatuses: full.Status.InitContainerStatuses,
			Reason:                "r", Message: "m",
		},
	}
	got, err := stripPod(full)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stripPod (-want +got):\n%s", diff)
	}
	// Anything else passes through.
	cm := configMapOf("x", "")
	if got, err := stripPod(cm); err != nil || got != any(cm) {
		t.Errorf("stripPod(ConfigMap) = %v, %v; want it unchanged", got, err)
	}
}

func TestStripJobSet(t *testing.T) {
	rj := func(name string, pod corev1.PodSpec) jobsetv1alpha2.ReplicatedJob {
		r := jobsetv1alpha2.ReplicatedJob{Name: name, Replicas: 1}
		r.Template.Labels = map[string]string{"trainer.kubeflow.org/trainjob-ancestor-step": name}
		r.Template.Spec.Parallelism, r.Template.Spec.Completions = ptr.To[int32](2), ptr.To[int32](2)
		r.Template.Spec.Template.Labels = map[string]string{"pod": name}
		r.Template.Spec.Template.Spec = pod
		return r
	}
	js := func(pod corev1.PodSpec, managed []metav1.ManagedFieldsEntry) *jobsetv1alpha2.JobSet {
		return &jobsetv1alpha2.JobSet{
			ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: testNS, UID: "js-uid",
				Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"trainyard.io/runtime-snapshot": "snap"},
				OwnerReferences: controlledBy("job-uid", "job"), ManagedFields: managed},
			Spec: jobsetv1alpha2.JobSetSpec{Suspend: ptr.To(true),
				ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{rj("dataset-initializer", pod), rj("trainer", pod)}},
			Status: jobsetv1alpha2.JobSetStatus{ReplicatedJobsStatus: []jobsetv1alpha2.ReplicatedJobStatus{{Name: "trainer", Active: 1}}},
		}
	}
	pod := corev1.PodSpec{Containers: []corev1.Container{{Name: "node", Image: "pytorch", Env: []corev1.EnvVar{{Name: "A", Value: "1"}}}},
		Volumes: []corev1.Volume{{Name: "v"}}}
	got, err := StripJobSet(js(pod, []metav1.ManagedFieldsEntry{{Manager: "trainyard"}}))
	if err != nil {
		t.Fatal(err)
	}
	want := js(corev1.PodSpec{}, nil)
	for k := range want.Spec.ReplicatedJobs {
		want.Spec.ReplicatedJobs[k].Template.Spec.Template.Labels = nil
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("StripJobSet (-want +got):\n%s", diff)
	}
	cm := configMapOf("x", "")
	if got, err := StripJobSet(cm); err != nil || got != any(cm) {
		t.Errorf("StripJobSet(ConfigMap) = %v, %v; want it unchanged", got, err)
	}
}

func TestStripData(t *testing.T) {
	meta := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: "job-tls-config", Namespace: testNS, Labels: map[string]string{"a": "b"},
			Annotations: map[string]string{childsync.RenderHashAnnotation: "h"}, OwnerReferences: controlledBy("job-uid", "job")}
	}
	withManaged := func() metav1.ObjectMeta {
		m := meta()
		m.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "trainyard"}}
		return m
	}
	cases := map[string]struct {
		in, want any
	}{
		"ConfigMap": {
			in:   &corev1.ConfigMap{ObjectMeta: withManaged(), Data: map[string]string{"ca.crt": "PEM"}, BinaryData: map[string][]byte{"b": {1}}},
			want: &corev1.ConfigMap{ObjectMeta: meta()},
		},
		"Secret": {
			in:   &corev1.Secret{ObjectMeta: withManaged(), Data: map[string][]byte{"ssh-privatekey": []byte("key")}, Type: corev1.SecretTypeSSHAuth},
			want: &corev1.Secret{ObjectMeta: meta(), Type: corev1.SecretTypeSSHAuth},
		},
		"anything else passes through": {
			in:   &corev1.Service{ObjectMeta: meta()},
			want: &corev1.Service{ObjectMeta: meta()},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := stripData(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("stripData (-want +got):\n%s", diff)
			}
		})
	}
}
