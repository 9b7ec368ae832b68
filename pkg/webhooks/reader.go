package webhooks

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// LiveOnMiss returns a reader that reads from cache and asks live only when
// the cache says an object does not exist (see liveOnMiss).
func LiveOnMiss(cache, live client.Reader) client.Reader {
	return liveOnMiss{Reader: cache, live: live}
}

// liveOnMiss reads from the manager's cache and asks the API server only when
// the cache says an object does not exist. The cache lags the API server: a
// runtime applied together with its TrainJob (`kubectl apply -f runtime.yaml
// -f trainjob.yaml`, a test creating both) can reach the webhook before the
// runtime reaches the informer, and a rejection must not depend on that race.
// A hit needs no second read, and a real miss costs one GET, so the common
// path stays on the cache.
//
// Admission callers are not authenticated (the webhook server serves anyone
// who reaches its port), so the live reads are bounded by LiveReads: whoever
// posts AdmissionReviews that name objects that do not exist must not spend
// the manager's client budget, which the reconcilers share.
type liveOnMiss struct {
	client.Reader
	live client.Reader
	// reads bounds the live reads (nil: the process's shared bound,
	// SetLiveReads).
	reads *LiveReads
}

// Get implements client.Reader.
func (r liveOnMiss) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := r.Reader.Get(ctx, key, obj, opts...)
	if !apierrors.IsNotFound(err) {
		return err
	}
	reads := r.reads
	if reads == nil {
		reads = sharedLiveReads.Load()
	}
	return reads.get(ctx, r.live, key, obj, opts...)
}

// sharedLiveReads bounds the live reads of every webhook of this process
// together (liveOnMiss without reads of its own): one bound per replica,
// whichever webhook a flood calls.
var sharedLiveReads atomic.Pointer[LiveReads]

func init() { sharedLiveReads.Store(DefaultLiveReads()) }

// SetLiveReads replaces the bound of the webhooks' live reads (nil: none;
// for tests that measure a flood without it) and returns the one before.
func SetLiveReads(l *LiveReads) *LiveReads { return sharedLiveReads.Swap(l) }

// Defaults of LiveReads: the live reads of every webhook of one replica
// together, and how long a read that found nothing is believed.
const (
	DefaultLiveReadQPS      = 10
	DefaultLiveReadBurst    = 20
	DefaultLiveNotFoundTTL  = 2 * time.Second
	defaultLiveNotFoundSize = 4096
)

// LiveReads bounds the webhooks' reads of the API server on a cache miss:
//   - concurrent reads of one object share one GET;
//   - a GET that found nothing is believed for NotFoundTTL (short: it only
//     has to cover the informer's lag), at most defaultLiveNotFoundSize of
//     them, least recently used out;
//   - GETs are limited to QPS per second, Burst at once, whoever asks: over
//     it the lookup fails with 429 (the webhook answers with an internal
//     error naming the field, and the client retries), and the API server is
//     not asked.
//
// Anyone can name objects that do not exist, each another one, so the rate
// limit is the bound; the rest keeps the common cases (a retried apply, the
// API server calling both webhooks of one request) from spending it.
type LiveReads struct {
	limiter  *rate.Limiter
	notFound *utilcache.LRUExpireCache
	ttl      time.Duration

	mu       sync.Mutex
	inflight map[liveKey]*liveCall
}

// liveKey names an object of a Go type.
type liveKey struct {
	typ       reflect.Type
	namespace string
	name      string
}

// liveCall is one GET in flight; readers of the same object wait for it.
type liveCall struct {
	done chan struct{}
	obj  client.Object
	err  error
}

// NewLiveReads returns a bound of qps GETs per second, burst at once (qps 0:
// no rate limit), believing a NotFound for notFoundTTL (0: not at all).
func NewLiveReads(qps float64, burst int, notFoundTTL time.Duration) *LiveReads {
	l := &LiveReads{notFound: utilcache.NewLRUExpireCache(defaultLiveNotFoundSize), ttl: notFoundTTL, inflight: map[liveKey]*liveCall{}}
	if qps > 0 {
		l.limiter = rate.NewLimiter(rate.Limit(qps), burst)
	}
	return l
}

// DefaultLiveReads is the bound the manager's webhooks use.
func DefaultLiveReads() *LiveReads {
	return NewLiveReads(DefaultLiveReadQPS, DefaultLiveReadBurst, DefaultLiveNotFoundTTL)
}

func (l *LiveReads) get(ctx context.Context, live client.Reader, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if l == nil {
		return live.Get(ctx, key, obj, opts...)
	}
	k := liveKey{typ: reflect.TypeOf(obj), namespace: key.Namespace, name: key.Name}
	if v, ok := l.notFound.Get(k); ok {
		return v.(error)
	}
	l.mu.Lock()
	if c, ok := l.inflight[k]; ok {
		l.mu.Unlock()
		select {
		case <-c.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if c.err == nil {
			reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(c.obj.DeepCopyObject()).Elem())
		}
		return c.err
	}
	c := &liveCall{done: make(chan struct{})}
	l.inflight[k] = c
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.inflight, k)
		l.mu.Unlock()
		close(c.done)
	}()
	if l.limiter != nil && !l.limiter.Allow() {
		c.err = apierrors.NewTooManyRequests(fmt.Sprintf("%s %q is not in the manager's cache, and too many objects that are not were looked up just now", reflect.TypeOf(obj).Elem().Name(), key.String()), 1)
		return c.err
	}
	c.err = live.Get(ctx, key, obj, opts...)
	switch {
	case c.err == nil:
		c.obj = obj.DeepCopyObject().(client.Object)
	case apierrors.IsNotFound(c.err) && l.ttl > 0:
		l.notFound.Add(k, c.err, l.ttl)
	}
	return c.err
}
