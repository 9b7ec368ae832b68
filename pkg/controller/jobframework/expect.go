package jobframework

import (
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

// Expected children (memory.expected). The pass that creates a job's
// children returns before the informers deliver them; a pass in between
// (another child's creation event, under a burst) would see no JobSet and
// create it again, to be told AlreadyExists: a wasted write and a reconcile
// error. Such a pass waits instead: the awaited child's creation event
// brings the next one.

// created records the children a pass created for a job at now, of the
// kinds observed (a kind the pass does not list would never show).
func (m *memory) created(job types.NamespacedName, res childsync.Result, now time.Time, observed func(schema.GroupKind) bool) {
	var keys []childsync.Key
	for k, a := range res.Actions {
		if a == childsync.Created && observed(k.GroupKind) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return
	}
	m.update(job, true, func(j *jobMemory) { j.expected, j.expectedSince = keys, now })
}

// waiting reports how much longer a pass over a job must wait for children
// the cache has not shown yet (0: none awaited, go on).
func (m *memory) waiting(job types.NamespacedName, obs *observe.Observed, now time.Time) time.Duration {
	var left time.Duration
	m.update(job, false, func(j *jobMemory) {
		if len(j.expected) == 0 {
			return
		}
		if left = j.expectedSince.Add(expectWait).Sub(now); left <= 0 {
			j.expected, left = nil, 0
			return
		}
		for _, k := range j.expected {
			if _, seen := obs.Children[k]; !seen {
				return
			}
		}
		j.expected, left = nil, 0
	})
	return left
}
