// Package reviewlimit bounds what clients that present bearer tokens may cost
// a server that has the API server review each token (TokenReview). A token
// never seen costs a review, so whoever can reach such a port could spend the
// manager's client budget, which the reconcilers share, with made-up tokens.
// The runtime status server (pkg/statusserver) and the metrics endpoint
// (pkg/metrics/serving) check tokens through a Guard:
//
//   - verdicts are cached (Cache): positive and negative ones apart, each
//     size-bounded, tokens kept only as keyed hashes;
//   - requests are limited per source address until their token has passed,
//     per token after (ClientLimits);
//   - reviews are limited per second for everyone together (Budget), a
//     quarter of the burst kept for renewals;
//   - requests with the same token share one review;
//   - a renewal is the review of a token that passed before and whose verdict
//     went stale, or of a new token of an identity that passed (a projected
//     token the kubelet rotated: same service account and pod), so that a
//     flood of bogus tokens does not lock out the clients already served.
//
// docs/progress.md ("Limits") and docs/security.md say what each bound is for
// and what a flood cost with and without them.
package reviewlimit

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/lru"
)

// Limits bound what a client may cost: requests per second per client,
// reviews per second in all, and the verdict cache. A QPS of 0 turns that
// limit off.
type Limits struct {
	// ClientQPS and ClientBurst: requests per second of one source address
	// whose token has no positive verdict in the cache (no token, a bogus
	// one, one not reviewed yet). The source address is the TCP peer's:
	// no header (X-Forwarded-For, ...) is trusted.
	ClientQPS   float64
	ClientBurst int
	// TokenQPS and TokenBurst: requests per second of one token that
	// passed, whatever its address.
	TokenQPS   float64
	TokenBurst int
	// ReviewQPS and ReviewBurst: reviews per second of this replica,
	// whoever asks. A request that would exceed it is refused (503 with
	// Retry-After), and the API server is not asked.
	ReviewQPS   float64
	ReviewBurst int
	// CacheSize is the most verdicts each of the two caches (positive,
	// negative) holds; CacheTTL and NegativeCacheTTL how long a verdict
	// is served.
	CacheSize                  int
	CacheTTL, NegativeCacheTTL time.Duration
}

// Defaults of the verdict cache (Limits).
const (
	DefaultCacheSize        = 10000
	DefaultCacheTTL         = time.Minute
	DefaultNegativeCacheTTL = 10 * time.Second
)

// DefaultLimits are the manager's defaults. A client that passed costs one
// review per CacheTTL and sends far less than TokenQPS; ReviewQPS stays well
// below the manager's client QPS, so a flood cannot crowd out the
// reconcilers.
func DefaultLimits() Limits {
	return Limits{
		ClientQPS: 5, ClientBurst: 20,
		TokenQPS: 10, TokenBurst: 50,
		ReviewQPS: 20, ReviewBurst: 40,
		CacheSize: DefaultCacheSize, CacheTTL: DefaultCacheTTL, NegativeCacheTTL: DefaultNegativeCacheTTL,
	}
}

// Validate reports a limit that cannot work.
func (l Limits) Validate() error {
	for _, c := range []struct {
		name  string
		qps   float64
		burst int
	}{{"client", l.ClientQPS, l.ClientBurst}, {"token", l.TokenQPS, l.TokenBurst}, {"token review", l.ReviewQPS, l.ReviewBurst}} {
		if c.qps < 0 || math.IsNaN(c.qps) || math.IsInf(c.qps, 0) {
			return fmt.Errorf("%s QPS %v: must be a number ≥ 0", c.name, c.qps)
		}
		if c.qps > 0 && c.burst < 1 {
			return fmt.Errorf("%s burst %d: must be at least 1", c.name, c.burst)
		}
	}
	if l.CacheSize < 0 || l.CacheTTL < 0 || l.NegativeCacheTTL < 0 {
		return fmt.Errorf("the token cache's size and TTLs must not be negative")
	}
	return nil
}

// ClientLimits returns the per-client limits of l.
func (l Limits) ClientLimits() *ClientLimits {
	return &ClientLimits{byAddr: NewKeyedLimiter(l.ClientQPS, l.ClientBurst), byToken: NewKeyedLimiter(l.TokenQPS, l.TokenBurst)}
}

// Budget returns the review budget of l (nil, unbounded, when ReviewQPS is 0).
func (l Limits) Budget() *Budget { return NewBudget(l.ReviewQPS, l.ReviewBurst) }

// ClientLimits are token buckets per source address and per token.
type ClientLimits struct {
	byAddr, byToken *KeyedLimiter
}

// Addr is the limiter per source address (nil: none).
func (c *ClientLimits) Addr() *KeyedLimiter {
	if c == nil {
		return nil
	}
	return c.byAddr
}

// Token is the limiter per token that passed (nil: none).
func (c *ClientLimits) Token() *KeyedLimiter {
	if c == nil {
		return nil
	}
	return c.byToken
}

// maxClients bounds the buckets kept per kind (least recently used go
// first; a forgotten client starts again with a full bucket).
const maxClients = 65536

// KeyedLimiter is a token bucket per key, for at most maxClients keys. The
// nil KeyedLimiter allows everything.
type KeyedLimiter struct {
	qps   rate.Limit
	burst int
	mu    sync.Mutex
	lru   *lru.Cache
}

// NewKeyedLimiter returns a limiter of qps per key, burst at once; nil (no
// limit) when qps is 0.
func NewKeyedLimiter(qps float64, burst int) *KeyedLimiter {
	if qps <= 0 {
		return nil
	}
	return &KeyedLimiter{qps: rate.Limit(qps), burst: burst, lru: lru.New(maxClients)}
}

// Allow takes a token from key's bucket, or says when to come back.
func (k *KeyedLimiter) Allow(key any, now time.Time) (bool, time.Duration) {
	if k == nil {
		return true, 0
	}
	k.mu.Lock()
	var l *rate.Limiter
	if v, ok := k.lru.Get(key); ok {
		l = v.(*rate.Limiter)
	} else {
		l = rate.NewLimiter(k.qps, k.burst)
		k.lru.Add(key, l)
	}
	k.mu.Unlock()
	r := l.ReserveN(now, 1)
	if !r.OK() {
		return false, time.Second
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// Budget bounds the reviews per second of one replica. A quarter of the
// burst is kept for renewals: the review of a client that passed before may
// take the last reviews, a token never seen may not, so a flood of bogus
// tokens does not lock out the clients that are already served. The nil
// Budget is unbounded.
type Budget struct {
	mu      sync.Mutex
	lim     *rate.Limiter
	reserve float64
}

// NewBudget returns a budget of qps reviews per second, burst at once; nil
// (unbounded) when qps is 0.
func NewBudget(qps float64, burst int) *Budget {
	if qps <= 0 {
		return nil
	}
	return &Budget{lim: rate.NewLimiter(rate.Limit(qps), burst), reserve: float64(burst / 4)}
}

// Take spends one review, or says when to come back.
func (b *Budget) Take(now time.Time, renewal bool) (bool, time.Duration) {
	if b == nil {
		return true, 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	need := 1.0
	if !renewal {
		need += b.reserve
	}
	if have := b.lim.TokensAt(now); have < need {
		return false, time.Duration((need - have) / float64(b.lim.Limit()) * float64(time.Second))
	}
	b.lim.AllowN(now, 1)
	return true, 0
}

// Throttled is a request refused by a limit: come back after RetryAfter.
// Budget tells the review budget (503 Service Unavailable: the server is
// busy) from a per-client limit (429 Too Many Requests: this client sends
// too much).
type Throttled struct {
	RetryAfter time.Duration
	Budget     bool
}

func (e *Throttled) Error() string {
	if e.Budget {
		return fmt.Sprintf("too many token reviews: retry after %v", e.RetryAfter.Round(time.Millisecond))
	}
	return fmt.Sprintf("too many requests: retry after %v", e.RetryAfter.Round(time.Millisecond))
}

// StatusCode is the HTTP status of the refusal: 503 for the budget, 429 for
// a client's limit.
func (e *Throttled) StatusCode() int {
	if e.Budget {
		return http.StatusServiceUnavailable
	}
	return http.StatusTooManyRequests
}

// SourceAddr is the IP address of the TCP peer (RemoteAddr, which no header
// changes: these servers sit behind no proxy they could trust).
func SourceAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// RetryAfter is the value of a Retry-After header: whole seconds, at least 1.
func RetryAfter(d time.Duration) string {
	return strconv.Itoa(max(1, int(math.Ceil(d.Seconds()))))
}
