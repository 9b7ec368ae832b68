package webhooks

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// countingReader counts Gets and answers them from a fake client, or with
// err; with gate set, each Get first waits for it to close.
type countingReader struct {
	client.Reader
	err  error
	gate chan struct{}
	gets atomic.Int64
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.gets.Add(1)
	if r.gate != nil {
		<-r.gate
	}
	if r.err != nil {
		return r.err
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

func TestLiveOnMiss(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := trainer.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	rt := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "torch"}}
	with := func() client.Reader {
		return fake.NewClientBuilder().WithScheme(scheme).WithObjects(rt.DeepCopy()).Build()
	}
	without := func() client.Reader { return fake.NewClientBuilder().WithScheme(scheme).Build() }
	broken := errors.New("cache broken")

	for name, tc := range map[string]struct {
		cache, live   client.Reader
		cacheErr      error
		wantErr       func(error) bool
		wantLiveGets  int
		wantCacheGets int
	}{
		"in the cache: no live read":        {cache: with(), live: with(), wantLiveGets: 0, wantCacheGets: 1},
		"not cached yet: read live":         {cache: without(), live: with(), wantLiveGets: 1, wantCacheGets: 1},
		"nowhere: not found after one read": {cache: without(), live: without(), wantErr: apierrors.IsNotFound, wantLiveGets: 1, wantCacheGets: 1},
		"cache fails: its error, no retry":  {cache: with(), live: with(), cacheErr: broken, wantErr: func(err error) bool { return errors.Is(err, broken) }, wantCacheGets: 1},
	} {
		t.Run(name, func(t *testing.T) {
			cache := &countingReader{Reader: tc.cache, err: tc.cacheErr}
			live := &countingReader{Reader: tc.live}
			var got trainer.TrainingRuntime
			err := liveOnMiss{Reader: cache, live: live, reads: NewLiveReads(0, 0, 0)}.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "torch"}, &got)
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("Get: %v", err)
			case tc.wantErr != nil && !tc.wantErr(err):
				t.Fatalf("Get: got error %v", err)
			case tc.wantErr == nil && got.Name != "torch":
				t.Errorf("Get returned %q, want torch", got.Name)
			}
			if diff := cmp.Diff([]int{tc.wantCacheGets, tc.wantLiveGets}, []int{int(cache.gets.Load()), int(live.gets.Load())}); diff != "" {
				t.Errorf("reads [cache live] (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLiveReads: the live reads on a cache miss are bounded: concurrent
// reads of one object share a GET (and each reader gets its own copy), a
// NotFound is believed for the TTL, and GETs beyond the rate fail with 429
// without reaching the API server.
func TestLiveReads(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := trainer.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	rt := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "torch"}}
	empty := fake.NewClientBuilder().WithScheme(scheme).Build()
	ctx := context.Background()
	get := func(r liveOnMiss, name string) (*trainer.TrainingRuntime, error) {
		var got trainer.TrainingRuntime
		err := r.Get(ctx, client.ObjectKey{Namespace: "ns", Name: name}, &got)
		return &got, err
	}

	t.Run("concurrent reads of one object share a GET", func(t *testing.T) {
		live := &countingReader{Reader: fake.NewClientBuilder().WithScheme(scheme).WithObjects(rt.DeepCopy()).Build(), gate: make(chan struct{})}
		r := liveOnMiss{Reader: empty, live: live, reads: NewLiveReads(1, 1, time.Minute)}
		var wg sync.WaitGroup
		got := make([]*trainer.TrainingRuntime, 20)
		for i := range got {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var err error
				if got[i], err = get(r, "torch"); err != nil {
					t.Errorf("reader %d: %v", i, err)
				}
			}()
		}
		for live.gets.Load() == 0 {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond) // the others queue behind the first
		close(live.gate)
		wg.Wait()
		if n := live.gets.Load(); n != 1 {
			t.Errorf("%d live reads for 20 concurrent readers, want 1", n)
		}
		for i := range got {
			if got[i].Name != "torch" {
				t.Errorf("reader %d got %q", i, got[i].Name)
			}
		}
	})

	t.Run("a NotFound is believed for the TTL", func(t *testing.T) {
		live := &countingReader{Reader: empty}
		r := liveOnMiss{Reader: empty, live: live, reads: NewLiveReads(0, 0, 100*time.Millisecond)}
		for range 10 {
			if _, err := get(r, "missing"); !apierrors.IsNotFound(err) {
				t.Fatalf("missing runtime: %v, want NotFound", err)
			}
		}
		if n := live.gets.Load(); n != 1 {
			t.Errorf("%d live reads for 10 lookups of a missing runtime, want 1", n)
		}
		time.Sleep(150 * time.Millisecond)
		if _, err := get(r, "missing"); !apierrors.IsNotFound(err) || live.gets.Load() != 2 {
			t.Errorf("after the TTL: %v, %d live reads; want NotFound after a second read", err, live.gets.Load())
		}
	})

	t.Run("reads beyond the rate are refused without a GET", func(t *testing.T) {
		live := &countingReader{Reader: empty}
		r := liveOnMiss{Reader: empty, live: live, reads: NewLiveReads(0.001, 5, time.Second)}
		throttled := 0
		for i := range 100 {
			_, err := get(r, fmt.Sprintf("missing-%d", i))
			switch {
			case apierrors.IsTooManyRequests(err):
				throttled++
			case !apierrors.IsNotFound(err):
				t.Fatalf("lookup %d: %v", i, err)
			}
		}
		if n := live.gets.Load(); n != 5 || throttled != 95 {
			t.Errorf("100 distinct missing runtimes: %d live reads, %d refused; want 5 (the burst) and 95", n, throttled)
		}
	})
}
