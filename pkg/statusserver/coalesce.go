package statusserver

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// WriteFunc writes one TrainJob's trainerStatus.
type WriteFunc func(ctx context.Context, key types.NamespacedName, st *trainer.TrainerStatus) error

// Coalescer bounds the writes to the API server per TrainJob: the first
// report is written at once; reports that arrive while a write is in flight,
// or within Interval after it, replace one another, and only the latest is
// written when the interval is over. So a trainer posting 1000 times a second
// costs at most one write per Interval, the last report always lands, and a
// quiet job costs nothing (its goroutine exits once nothing is pending).
type Coalescer struct {
	Interval time.Duration
	Write    WriteFunc
	// OnError is told about failed writes (the report is dropped: the
	// trainer's next report replaces it anyway).
	OnError func(key types.NamespacedName, err error)

	mu   sync.Mutex
	jobs map[types.NamespacedName]*pending
	ctx  context.Context
	wg   sync.WaitGroup
}

type pending struct {
	latest *trainer.TrainerStatus
}

// Start sets the context of the writes; Submit before Start uses Background.
func (c *Coalescer) Start(ctx context.Context) {
	c.mu.Lock()
	c.ctx = ctx
	c.mu.Unlock()
}

// Submit queues st as the latest report of key.
func (c *Coalescer) Submit(key types.NamespacedName, st *trainer.TrainerStatus) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.jobs == nil {
		c.jobs = map[types.NamespacedName]*pending{}
	}
	if p, ok := c.jobs[key]; ok {
		p.latest = st // a writer loop runs for key and will pick it up
		return
	}
	c.jobs[key] = &pending{latest: st}
	ctx := c.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	c.wg.Add(1)
	go c.loop(ctx, key)
}

// loop writes key's latest report, waits Interval, and repeats until no
// report came in meanwhile.
func (c *Coalescer) loop(ctx context.Context, key types.NamespacedName) {
	defer c.wg.Done()
	for {
		c.mu.Lock()
		p := c.jobs[key]
		st := p.latest
		if st == nil {
			delete(c.jobs, key)
			c.mu.Unlock()
			return
		}
		p.latest = nil
		c.mu.Unlock()

		if err := c.Write(ctx, key, st); err != nil && c.OnError != nil {
			c.OnError(key, err)
		}
		if c.Interval > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(c.Interval):
			}
		}
	}
}

// Wait returns once every queued report is written (for tests and shutdown).
func (c *Coalescer) Wait() { c.wg.Wait() }
