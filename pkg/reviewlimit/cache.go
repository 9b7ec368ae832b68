package reviewlimit

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"time"

	utilcache "k8s.io/apimachinery/pkg/util/cache"
)

// Key identifies a (scope, token) pair: an HMAC-SHA256 under a key drawn at
// start, so that the cache holds no token, and what it holds is of no use
// outside this process (no precomputed table matches it). The scope is what
// the token is checked for (the status server: the TrainJob's audience).
type Key [sha256.Size]byte

// State is what the cache knows of a key.
type State int

// The states of a key.
const (
	Unknown State = iota // never seen, or forgotten
	Allowed              // a positive verdict younger than the TTL
	Stale                // a positive verdict older than the TTL, younger than twice it: review again, with priority
	Denied               // a negative verdict younger than the negative TTL
)

func (s State) String() string {
	return [...]string{"unknown", "allowed", "stale", "denied"}[s]
}

// Clock is the cache's and the budget's clock (tests set one).
type Clock = utilcache.Clock

// RealClock is time.Now.
type RealClock struct{}

// Now is time.Now.
func (RealClock) Now() time.Time { return time.Now() }

// Cache holds verdicts in two size-bounded LRU caches with per-entry expiry
// (apimachinery's LRUExpireCache: a map and a list, O(1) per lookup, one short
// critical section each). Negative verdicts have a cache of their own, so a
// flood of bogus tokens evicts only other bogus tokens, never the verdict of a
// client that passed. A positive verdict holds what the review said (V).
type Cache[V any] struct {
	hmacKey        []byte
	pos, neg       *utilcache.LRUExpireCache
	posTTL, negTTL time.Duration
	clock          Clock
}

// positive is the value of a positive entry: it is served until fresh, and
// kept as a renewal candidate until it expires from the cache (twice the TTL).
type positive[V any] struct {
	fresh time.Time
	v     V
}

// NewCache returns a cache of size verdicts of each kind (0: the defaults).
func NewCache[V any](size int, posTTL, negTTL time.Duration, clock Clock) *Cache[V] {
	if size <= 0 {
		size = DefaultCacheSize
	}
	if posTTL <= 0 {
		posTTL = DefaultCacheTTL
	}
	if negTTL <= 0 {
		negTTL = DefaultNegativeCacheTTL
	}
	if clock == nil {
		clock = RealClock{}
	}
	return &Cache[V]{
		hmacKey: randomKey(),
		pos:     utilcache.NewLRUExpireCacheWithClock(size, clock),
		neg:     utilcache.NewLRUExpireCacheWithClock(size, clock),
		posTTL:  posTTL, negTTL: negTTL, clock: clock,
	}
}

func randomKey() []byte {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return key
}

// keyOf is the HMAC of parts under hmacKey, each part ended by a NUL.
func keyOf(hmacKey []byte, parts ...string) Key {
	m := hmac.New(sha256.New, hmacKey)
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	var k Key
	copy(k[:], m.Sum(nil))
	return k
}

// Key is the key of token checked for scope.
func (c *Cache[V]) Key(scope, token string) Key { return keyOf(c.hmacKey, scope, token) }

// Get returns the state of k, and what the positive verdict held or the
// negative verdict's error.
func (c *Cache[V]) Get(k Key) (State, V, error) {
	var zero V
	if v, ok := c.neg.Get(k); ok {
		return Denied, zero, v.(error)
	}
	if v, ok := c.pos.Get(k); ok {
		p := v.(positive[V])
		if c.clock.Now().Before(p.fresh) {
			return Allowed, p.v, nil
		}
		return Stale, p.v, nil
	}
	return Unknown, zero, nil
}

// Put records a verdict: err nil is positive (holding v), else negative.
func (c *Cache[V]) Put(k Key, v V, err error) {
	if err == nil {
		c.neg.Remove(k)
		c.pos.Add(k, positive[V]{fresh: c.clock.Now().Add(c.posTTL), v: v}, 2*c.posTTL)
		return
	}
	c.pos.Remove(k)
	c.neg.Add(k, err, c.negTTL)
}

// Len is how many positive and negative verdicts the cache holds.
func (c *Cache[V]) Len() (pos, neg int) { return len(c.pos.Keys()), len(c.neg.Keys()) }

// Keys are the keys of the positive and of the negative verdicts.
func (c *Cache[V]) Keys() (pos, neg []any) { return c.pos.Keys(), c.neg.Keys() }
