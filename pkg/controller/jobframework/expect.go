package jobframework

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/trainyard/trainyard/pkg/childsync"
	"github.com/trainyard/trainyard/pkg/observe"
)

// expectWait bounds how long a pass waits for the cache to show children an
// earlier pass created; past it, the pass goes on as if nothing was expected
// (the child may have been deleted since).
const expectWait = 10 * time.Second

// expected remembers, per job, the children a pass created that the cache
// has not shown yet. The pass that creates a job's children returns before
// the informers deliver them; a pass in between (another child's creation
// event, under a burst) would see no JobSet and create it again, to be told
// AlreadyExists: a wasted write and a reconcile error. Such a pass waits
// instead: the awaited child's creation event brings the next one.
type expected struct {
	mu   sync.Mutex
	jobs map[types.NamespacedName]expectation
}

type expectation struct {
	keys  []childsync.Key
	since time.Time
}

// created records the children a pass created for a job at now, of the
// kinds observed (a kind the pass does not list would never show).
func (e *expected) created(job types.NamespacedName, res childsync.Result, now time.Time, observed func(schema.GroupKind) bool) {
	var keys []childsync.Key
	for k, a := range res.Actions {
		if a == childsync.Created && observed(k.GroupKind) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.jobs == nil {
		e.jobs = map[types.NamespacedName]expectation{}
	}
	e.jobs[job] = expectation{keys: keys, since: now}
}

// waiting reports how much longer a pass over a job must wait for children
// the cache has not shown yet (0: none awaited, go on).
func (e *expected) waiting(job types.NamespacedName, obs *observe.Observed, now time.Time) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	exp, ok := e.jobs[job]
	if !ok {
		return 0
	}
	left := exp.since.Add(expectWait).Sub(now)
	if left <= 0 {
		deleteKey(&e.jobs, job)
		return 0
	}
	for _, k := range exp.keys {
		if _, seen := obs.Children[k]; !seen {
			return left
		}
	}
	deleteKey(&e.jobs, job)
	return 0
}

// forget drops what was expected for a job (it is gone).
func (e *expected) forget(job types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	deleteKey(&e.jobs, job)
}
