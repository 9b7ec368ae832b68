package statusserver

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"time"

	utilcache "k8s.io/apimachinery/pkg/util/cache"
)

// Defaults of the verdict cache (Limits).
const (
	DefaultCacheSize        = 10000
	DefaultCacheTTL         = time.Minute
	DefaultNegativeCacheTTL = 10 * time.Second
)

// cacheKey identifies a (token, audience) pair: an HMAC-SHA256 under a key
// drawn at start, so that the cache holds no token, and what it holds is of
// no use outside this process (no precomputed table matches it).
type cacheKey [sha256.Size]byte

// state is what the cache knows of a key.
type state int

const (
	unknown state = iota // never seen, or forgotten
	allowed              // a positive verdict younger than the TTL
	stale                // a positive verdict older than the TTL, younger than twice it: review again, with priority
	denied               // a negative verdict younger than the negative TTL
)

// verdictCache holds the Authorizer's verdicts in two size-bounded LRU caches
// with per-entry expiry (apimachinery's LRUExpireCache: a map and a list, O(1)
// per lookup, one short critical section each). Negative verdicts have a
// cache of their own, so a flood of bogus tokens evicts only other bogus
// tokens, never the verdict of a trainer that passed.
type verdictCache struct {
	hmacKey        []byte
	pos, neg       *utilcache.LRUExpireCache
	posTTL, negTTL time.Duration
	clock          utilcache.Clock
}

// positive is the value of a positive entry: it is served until fresh, and
// kept as a renewal candidate until it expires from the cache (twice the TTL).
type positive struct{ fresh time.Time }

func newVerdictCache(size int, posTTL, negTTL time.Duration, clock utilcache.Clock) *verdictCache {
	if size <= 0 {
		size = DefaultCacheSize
	}
	if posTTL <= 0 {
		posTTL = DefaultCacheTTL
	}
	if negTTL <= 0 {
		negTTL = DefaultNegativeCacheTTL
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return &verdictCache{
		hmacKey: key,
		pos:     utilcache.NewLRUExpireCacheWithClock(size, clock),
		neg:     utilcache.NewLRUExpireCacheWithClock(size, clock),
		posTTL:  posTTL, negTTL: negTTL, clock: clock,
	}
}

func (c *verdictCache) key(aud, token string) cacheKey {
	m := hmac.New(sha256.New, c.hmacKey)
	m.Write([]byte(aud))
	m.Write([]byte{0})
	m.Write([]byte(token))
	var k cacheKey
	copy(k[:], m.Sum(nil))
	return k
}

// get returns the state of k and, when denied, the cached error.
func (c *verdictCache) get(k cacheKey) (state, error) {
	if v, ok := c.neg.Get(k); ok {
		return denied, v.(error)
	}
	if v, ok := c.pos.Get(k); ok {
		if c.clock.Now().Before(v.(positive).fresh) {
			return allowed, nil
		}
		return stale, nil
	}
	return unknown, nil
}

// put records a verdict: err nil is positive, else negative (errForbidden).
func (c *verdictCache) put(k cacheKey, err error) {
	if err == nil {
		c.neg.Remove(k)
		c.pos.Add(k, positive{fresh: c.clock.Now().Add(c.posTTL)}, 2*c.posTTL)
		return
	}
	c.pos.Remove(k)
	c.neg.Add(k, err, c.negTTL)
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }
