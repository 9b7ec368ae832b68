package jobframework

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// footprintCopies is how many copies of an object BenchmarkCacheFootprint
// holds: enough that the heap's fixed part is noise next to them.
const footprintCopies = 2000

// footprintKinds are the cached objects a suspended TrainJob leaves, each
// with a real one in testdata/footprint/<name>.json.
var footprintKinds = []struct {
	name string
	new  func() client.Object
}{
	{"TrainJob", func() client.Object { return &trainer.TrainJob{} }},
	{"JobSet", func() client.Object { return &jobsetv1alpha2.JobSet{} }},
	{"ConfigMap", func() client.Object { return &corev1.ConfigMap{} }},
}

// BenchmarkCacheFootprint reports the bytes the manager's cache holds per
// object of each kind a suspended TrainJob leaves (testdata/footprint: real
// objects read back from a 10k bench run with kubectl get -o json): the Go
// heap after decoding footprintCopies copies, each with its own name and UID
// as in a cluster, and applying the cache's transform for the kind
// (CacheOptions), over footprintCopies. It leaves out what the informers add
// per object (the store's map entry and indexes) and the event broadcaster.
// Compare builds with make benchstat; the B/object metric is what counts,
// not the time.
func BenchmarkCacheFootprint(b *testing.B) {
	opts := CacheOptions([]client.Object{&corev1.ConfigMap{}, &jobsetv1alpha2.JobSet{}})
	for _, tc := range footprintKinds {
		b.Run(tc.name, func(b *testing.B) {
			data, err := os.ReadFile(filepath.Join("testdata", "footprint", tc.name+".json"))
			if err != nil {
				b.Fatal(err)
			}
			// Each copy differs in name and UID, as the objects of a
			// cluster do: nothing may be shared that a cluster's objects
			// would not share.
			docs := make([][]byte, footprintCopies)
			for i := range docs {
				var m map[string]any
				if err := json.Unmarshal(data, &m); err != nil {
					b.Fatal(err)
				}
				meta := m["metadata"].(map[string]any)
				meta["name"] = fmt.Sprintf("%s-%05d", meta["name"], i)
				meta["uid"] = string(types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i)))
				if docs[i], err = json.Marshal(m); err != nil {
					b.Fatal(err)
				}
			}
			transform := transformFor(b, opts, tc.new())
			var perObject float64
			for b.Loop() {
				held := make([]any, footprintCopies)
				var before, after goruntime.MemStats
				goruntime.GC()
				goruntime.ReadMemStats(&before)
				for i, doc := range docs {
					o := tc.new()
					if err := json.Unmarshal(doc, o); err != nil {
						b.Fatal(err)
					}
					if held[i], err = transform(o); err != nil {
						b.Fatal(err)
					}
				}
				goruntime.GC()
				goruntime.ReadMemStats(&after)
				perObject = float64(after.HeapAlloc-before.HeapAlloc) / footprintCopies
				goruntime.KeepAlive(held)
			}
			b.ReportMetric(perObject, "B/object")
		})
	}
}

// BenchmarkInternStrings is the CPU that sharing strings adds to each cached
// object's watch event (the decoding is not counted). The JobSet keeps its
// pod template here, which the cache strips first: an upper bound.
func BenchmarkInternStrings(b *testing.B) {
	for _, tc := range footprintKinds {
		b.Run(tc.name, func(b *testing.B) {
			data, err := os.ReadFile(filepath.Join("testdata", "footprint", tc.name+".json"))
			if err != nil {
				b.Fatal(err)
			}
			o := tc.new()
			if err := json.Unmarshal(data, o); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				internStrings(o)
			}
		})
	}
}
