package webhooks

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// countingReader counts Gets and answers them from a fake client, or with err.
type countingReader struct {
	client.Reader
	err  error
	gets int
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.gets++
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
			err := liveOnMiss{Reader: cache, live: live}.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "torch"}, &got)
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("Get: %v", err)
			case tc.wantErr != nil && !tc.wantErr(err):
				t.Fatalf("Get: got error %v", err)
			case tc.wantErr == nil && got.Name != "torch":
				t.Errorf("Get returned %q, want torch", got.Name)
			}
			if diff := cmp.Diff([]int{tc.wantCacheGets, tc.wantLiveGets}, []int{cache.gets, live.gets}); diff != "" {
				t.Errorf("reads [cache live] (-want +got):\n%s", diff)
			}
		})
	}
}
