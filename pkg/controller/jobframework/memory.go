package jobframework

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/trainyard/trainyard/pkg/childsync"
)

// memory is everything the reconciler remembers of a job between two
// passes, one entry per job:
//   - a status change that is held, and when it is due (coalesce.go);
//   - the events held to go out with the next status write (coalesce.go);
//   - the children a pass created that the cache has not shown yet
//     (expect.go);
//   - the children whose create was refused because something else holds
//     the name (taken.go).
//
// Everything else a pass needs it observes. This memory is lost with the
// process, by design: each part only saves a write or a pass, and a
// restarted manager finds its way from what it observes.
//
// A job's entry goes as soon as it holds nothing, and forget drops it at
// once: every path that ends a job's life in the reconciler (the job is gone,
// being deleted, no longer ours, deleted by its TTL) calls forget, and only
// forget. The map itself is dropped once empty: a Go map keeps the buckets of
// its largest size, so a burst of 1000 jobs would otherwise hold on to them
// (about 0.2 to 0.5 MB) long after every entry went.
type memory struct {
	mu   sync.Mutex
	jobs map[types.NamespacedName]*jobMemory
}

// jobMemory is one job's entry.
type jobMemory struct {
	// due is when the held status change must be written (zero: none).
	due time.Time
	// events go out with the job's next status write.
	events []Event
	// expected are children created at expectedSince that the cache has
	// not shown yet.
	expected      []childsync.Key
	expectedSince time.Time
	// taken are children whose create was refused (AlreadyExists).
	taken []childsync.Key
}

func (j *jobMemory) empty() bool {
	return j.due.IsZero() && len(j.events) == 0 && len(j.expected) == 0 && len(j.taken) == 0
}

// update runs fn on the job's entry (a new, empty one when there is none
// and create is set; else fn is not called), then drops the entry if it
// holds nothing.
func (m *memory) update(key types.NamespacedName, create bool, fn func(*jobMemory)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j := m.jobs[key]
	if j == nil {
		if !create {
			return
		}
		j = &jobMemory{}
	}
	fn(j)
	if j.empty() {
		m.drop(key)
		return
	}
	if m.jobs == nil {
		m.jobs = map[types.NamespacedName]*jobMemory{}
	}
	m.jobs[key] = j
}

// forget drops all the job's memory: the job is gone, or not ours to
// reconcile any more.
func (m *memory) forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.drop(key)
}

// drop deletes a job's entry and the map once it is empty; m.mu is held.
func (m *memory) drop(key types.NamespacedName) {
	delete(m.jobs, key)
	if len(m.jobs) == 0 {
		m.jobs = nil
	}
}

// size is the number of jobs remembered (for tests).
func (m *memory) size() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.jobs)
}

// holdEvents keeps events to send with the job's next status write.
func (m *memory) holdEvents(key types.NamespacedName, evs []Event) {
	if len(evs) == 0 {
		return
	}
	m.update(key, true, func(j *jobMemory) { j.events = append(j.events, evs...) })
}

// takeEvents returns and forgets the events held for the job.
func (m *memory) takeEvents(key types.NamespacedName) []Event {
	var evs []Event
	m.update(key, false, func(j *jobMemory) { evs, j.events = j.events, nil })
	return evs
}

// wait records a change of a job's status seen at now that may wait up to
// allowance, and reports how long the job's write must still wait: 0 when
// it is due.
func (m *memory) wait(key types.NamespacedName, now time.Time, allowance time.Duration) time.Duration {
	var due time.Time
	m.update(key, true, func(j *jobMemory) {
		if j.due.IsZero() || now.Add(allowance).Before(j.due) {
			j.due = now.Add(allowance)
		}
		due = j.due
	})
	return max(due.Sub(now), 0)
}

// held reports whether a status change of the job waits to be written.
func (m *memory) held(key types.NamespacedName) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	j := m.jobs[key]
	return j != nil && !j.due.IsZero()
}

// done forgets a job's waiting change: it was written, or there is none.
func (m *memory) done(key types.NamespacedName) {
	m.update(key, false, func(j *jobMemory) { j.due = time.Time{} })
}
