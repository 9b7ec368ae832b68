package statusserver

import (
	"context"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// recorder is a WriteFunc that holds every write until the test releases it,
// so the test decides what arrives while a write is in flight.
type recorder struct {
	mu      sync.Mutex
	writes  map[types.NamespacedName][]int32
	started chan struct{}
	release chan struct{}
}

func newRecorder() *recorder {
	return &recorder{writes: map[types.NamespacedName][]int32{}, started: make(chan struct{}, 100), release: make(chan struct{})}
}

func (r *recorder) write(_ context.Context, key types.NamespacedName, st *trainer.TrainerStatus) error {
	r.started <- struct{}{}
	<-r.release
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes[key] = append(r.writes[key], *st.ProgressPercentage)
	return nil
}

func report(p int32) *trainer.TrainerStatus {
	return &trainer.TrainerStatus{ProgressPercentage: ptr.To(p)}
}

func TestCoalescerWritesFirstAndLatest(t *testing.T) {
	r := newRecorder()
	c := &Coalescer{Write: r.write}
	a := types.NamespacedName{Namespace: "team", Name: "a"}
	b := types.NamespacedName{Namespace: "team", Name: "b"}

	c.Submit(a, report(0))
	<-r.started // the first report of a is being written
	for p := int32(1); p <= 100; p++ {
		c.Submit(a, report(p)) // all while that write is in flight
	}
	c.Submit(b, report(7)) // another job is not held up by a
	<-r.started
	close(r.release)
	c.Wait()

	want := map[types.NamespacedName][]int32{a: {0, 100}, b: {7}}
	if diff := cmp.Diff(want, r.writes); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
}

func TestCoalescerRestartsAfterIdle(t *testing.T) {
	r := newRecorder()
	close(r.release)
	c := &Coalescer{Write: r.write}
	a := types.NamespacedName{Namespace: "team", Name: "a"}
	c.Submit(a, report(10))
	c.Wait() // the loop wrote 10 and exited: nothing pending
	c.Submit(a, report(20))
	c.Wait()
	if diff := cmp.Diff(map[types.NamespacedName][]int32{a: {10, 20}}, r.writes); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
}
