package jobframework

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"unique"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// TestCacheTransformsShareStrings: every cache transform keeps the same
// object it kept before sharing strings, and two objects alike hold one copy
// of a string they both carry (a label, the owner's kind, the runtime
// snapshot), but each its own UID.
func TestCacheTransformsShareStrings(t *testing.T) {
	opts := CacheOptions([]client.Object{&corev1.ConfigMap{}, &jobsetv1alpha2.JobSet{}})
	cases := map[string]struct {
		file      string
		new       func() client.Object
		transform func(any) (any, error)
		plain     func(any) (any, error) // the same transform without sharing
		shared    func(client.Object) string
	}{
		"TrainJob": {
			file: "TrainJob", new: func() client.Object { return &trainer.TrainJob{} },
			transform: transformFor(t, opts, &trainer.TrainJob{}),
			plain:     func(o any) (any, error) { o.(client.Object).SetManagedFields(nil); return o, nil },
			shared:    func(o client.Object) string { return o.(*trainer.TrainJob).Spec.RuntimeRef.Name },
		},
		"JobSet": {
			file: "JobSet", new: func() client.Object { return &jobsetv1alpha2.JobSet{} },
			transform: transformFor(t, opts, &jobsetv1alpha2.JobSet{}),
			plain:     StripJobSet,
			shared:    func(o client.Object) string { return o.GetAnnotations()["trainyard.io/runtime-snapshot"] },
		},
		"ConfigMap": {
			file: "ConfigMap", new: func() client.Object { return &corev1.ConfigMap{} },
			transform: transformFor(t, opts, &corev1.ConfigMap{}),
			plain:     stripData,
			shared:    func(o client.Object) string { return o.GetOwnerReferences()[0].Kind },
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", "footprint", tc.file+".json"))
			if err != nil {
				t.Fatal(err)
			}
			decode := func() client.Object {
				o := tc.new()
				if err := json.Unmarshal(data, o); err != nil {
					t.Fatal(err)
				}
				return o
			}
			want, err := tc.plain(decode())
			if err != nil {
				t.Fatal(err)
			}
			// Hold the canonical copy, so that a collection between the two
			// transforms cannot drop it (unique keeps it only while in use).
			h := unique.Make(tc.shared(want.(client.Object)))
			var got [2]client.Object
			for k := range got {
				o, err := tc.transform(decode())
				if err != nil {
					t.Fatal(err)
				}
				got[k] = o.(client.Object)
			}
			if diff := cmp.Diff(want, got[0]); diff != "" {
				t.Errorf("transformed object changed by sharing (-want +got):\n%s", diff)
			}
			a, b := tc.shared(got[0]), tc.shared(got[1])
			if a == "" || unsafe.StringData(a) != unsafe.StringData(b) {
				t.Errorf("two objects hold two copies of %.40q", a)
			}
			if ua, ub := string(got[0].GetUID()), string(got[1].GetUID()); unsafe.StringData(ua) == unsafe.StringData(ub) {
				t.Error("two objects share one UID string: UIDs are not worth sharing")
			}
			_ = h.Value()
		})
	}
}

// TestInternLeavesUnstructured: the strings of an unstructured object sit
// behind interfaces, which sharing does not reach; it must not fail on them.
func TestInternLeavesUnstructured(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"kind": "PodGroup", "spec": map[string]any{"minMember": int64(2)}}}
	want := u.DeepCopy()
	internStrings(u)
	if diff := cmp.Diff(want, u); diff != "" {
		t.Errorf("unstructured object changed (-want +got):\n%s", diff)
	}
}

// transformFor is the cache transform CacheOptions gives objects of o's kind.
func transformFor(t testing.TB, opts cache.Options, o client.Object) toolscache.TransformFunc {
	t.Helper()
	for k, v := range opts.ByObject {
		if reflect.TypeOf(k) == reflect.TypeOf(o) && v.Transform != nil {
			return v.Transform
		}
	}
	return opts.DefaultTransform
}
