package reviewlimit

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	utilcache "k8s.io/apimachinery/pkg/util/cache"
)

// ErrDenied is a negative verdict: the review said no. A review's error that
// wraps it is cached (NegativeCacheTTL); any other error is no verdict (the
// API server could not answer) and the next request reviews again.
var ErrDenied = errors.New("forbidden")

// DefaultReviewTimeout bounds one review, which runs on behalf of every
// request waiting for it, whatever becomes of the first.
const DefaultReviewTimeout = 5 * time.Second

// IdentityTTL is how long a Guard remembers an identity that passed (see
// identities): a projected service account token lives an hour by default,
// and the kubelet replaces it before it expires.
const IdentityTTL = time.Hour

// maxIdentityFailures is how many renewals an identity may claim that end in
// a negative verdict before it loses its priority (until one passes again):
// the claim is read from the token before anyone verified it, so whoever
// knows a served pod's service account and UID may forge it, and may spend
// no more than this much of the reserve with it.
const maxIdentityFailures = 2

// Guard checks bearer tokens within Limits: it answers from its Cache, spends
// from the per-client buckets and the review budget, shares a review in
// flight, and otherwise asks review. V is what a positive review found (the
// user of a token, say).
type Guard[V any] struct {
	cache   *Cache[V]
	budget  *Budget
	clock   Clock
	ids     *identities
	timeout time.Duration

	mu       sync.Mutex
	inflight map[Key]*call[V]
}

// call is one review in flight, which requests with the same key wait for
// instead of asking again.
type call[V any] struct {
	done chan struct{}
	v    V
	err  error
}

// NewGuard returns a guard with a cache of size verdicts of each kind (0:
// DefaultCacheSize), positive verdicts fresh for ttl and negative ones kept
// for negTTL (0: the defaults), spending reviews from budget (nil:
// unbounded), on clock (nil: the real one).
func NewGuard[V any](size int, ttl, negTTL time.Duration, budget *Budget, clock Clock) *Guard[V] {
	if clock == nil {
		clock = RealClock{}
	}
	return &Guard[V]{
		cache: NewCache[V](size, ttl, negTTL, clock), budget: budget, clock: clock,
		ids: newIdentities(size, clock), timeout: DefaultReviewTimeout, inflight: map[Key]*call[V]{},
	}
}

// NewGuardFor returns a guard with l's cache and review budget.
func NewGuardFor[V any](l Limits, clock Clock) *Guard[V] {
	return NewGuard[V](l.CacheSize, l.CacheTTL, l.NegativeCacheTTL, l.Budget(), clock)
}

// SetReviewTimeout bounds each review (default DefaultReviewTimeout); call
// it before the guard is used.
func (g *Guard[V]) SetReviewTimeout(d time.Duration) { g.timeout = d }

// Lookup returns the key of token for scope and what the cache knows.
func (g *Guard[V]) Lookup(scope, token string) (Key, State) {
	k := g.cache.Key(scope, token)
	st, _, _ := g.cache.Get(k)
	return k, st
}

// Cache is the guard's verdict cache.
func (g *Guard[V]) Cache() *Cache[V] { return g.cache }

// Spend takes one review from the budget outside Check (a retry of a failed
// review), or says when to come back.
func (g *Guard[V]) Spend() (bool, time.Duration) { return g.budget.Take(g.clock.Now(), false) }

// Check decides on token for scope, sent from addr: a token with a positive
// verdict spends from its own bucket of clients (nil: no per-client limit),
// anything else from its address's bucket, so that a request refused there
// costs no review; a positive verdict is served from the cache, a negative
// one too; otherwise the token is reviewed (review), sharing a review in
// flight, within the budget. It returns what the review found, an error
// wrapping ErrDenied, a *Throttled, or the review's other error.
func (g *Guard[V]) Check(ctx context.Context, addr, scope, token string, clients *ClientLimits, review func(context.Context) (V, error)) (V, error) {
	var zero V
	k := g.cache.Key(scope, token)
	st, v, cached := g.cache.Get(k)
	now := g.clock.Now()
	lim, key := clients.Addr(), any(addr)
	if st == Allowed || st == Stale {
		lim, key = clients.Token(), k
	}
	if ok, after := lim.Allow(key, now); !ok {
		return zero, &Throttled{RetryAfter: after}
	}
	switch st {
	case Allowed:
		return v, nil
	case Denied:
		return zero, cached
	}

	g.mu.Lock()
	if c, ok := g.inflight[k]; ok {
		g.mu.Unlock()
		select {
		case <-c.done:
			return c.v, c.err
		case <-ctx.Done():
			return zero, ctx.Err()
		}
	}
	c := &call[V]{done: make(chan struct{})}
	g.inflight[k] = c
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.inflight, k)
		g.mu.Unlock()
		close(c.done)
	}()

	id, claimed := identityOf(token)
	idKey := keyOf(g.cache.hmacKey, scope, id)
	renewal := st == Stale || claimed && g.ids.known(idKey)
	if ok, after := g.budget.Take(now, renewal); !ok {
		c.err = &Throttled{RetryAfter: after, Budget: true}
		return zero, c.err
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.timeout)
	defer cancel()
	c.v, c.err = review(rctx)
	switch {
	case c.err == nil:
		g.cache.Put(k, c.v, nil)
		if claimed {
			g.ids.passed(idKey)
		}
	case errors.Is(c.err, ErrDenied):
		g.cache.Put(k, zero, c.err)
		if claimed {
			g.ids.failed(idKey)
		}
	} // else not a verdict: try again next time
	return c.v, c.err
}

// identities are the identities whose tokens passed, so that a new token of
// one (the kubelet rotates projected tokens at 80% of their life) is reviewed
// as a renewal, from the reserve, rather than as a stranger's during a flood.
// An identity is the token's subject and the pod it is bound to, read from
// the token's claims without verifying them: whoever knows them may claim
// them, so an identity loses its priority after maxIdentityFailures negative
// verdicts until one of its tokens passes again. Keys are keyed hashes, as the
// cache's.
type identities struct {
	mu  sync.Mutex
	lru *utilcache.LRUExpireCache
}

// identity is what is remembered of one: the negative verdicts since its last
// positive one.
type identity struct{ failures int }

func newIdentities(size int, clock Clock) *identities {
	if size <= 0 {
		size = DefaultCacheSize
	}
	return &identities{lru: utilcache.NewLRUExpireCacheWithClock(size, clock)}
}

func (s *identities) known(k Key) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.lru.Get(k)
	return ok && v.(*identity).failures < maxIdentityFailures
}

func (s *identities) passed(k Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lru.Add(k, &identity{}, IdentityTTL)
}

func (s *identities) failed(k Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.lru.Get(k); ok {
		v.(*identity).failures++
	}
}

// identityOf reads the subject and the bound pod's UID from a JWT's claims,
// unverified (a service account token's "sub" and "kubernetes.io".pod.uid).
// A token that is no JWT, or has no subject, claims no identity.
func identityOf(token string) (string, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 || len(parts[1]) > 8<<10 {
		return "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", false
	}
	var claims struct {
		Sub string `json:"sub"`
		K8s struct {
			Pod struct {
				UID string `json:"uid"`
			} `json:"pod"`
		} `json:"kubernetes.io"`
	}
	if err := json.Unmarshal(b, &claims); err != nil || claims.Sub == "" {
		return "", false
	}
	return claims.Sub + "\x00" + claims.K8s.Pod.UID, true
}
