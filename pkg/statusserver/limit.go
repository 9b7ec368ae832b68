package statusserver

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
	authnclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	"k8s.io/utils/lru"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Limits bound what a client of the status server may cost: requests per
// second per client, TokenReviews per second in all, and the verdict cache
// (docs/progress.md, "Limits"). A QPS of 0 turns that limit off.
type Limits struct {
	// ClientQPS and ClientBurst: requests per second of one source address
	// whose token has no positive verdict in the cache (no token, a bogus
	// one, one not reviewed yet). The source address is the TCP peer's:
	// no header (X-Forwarded-For, ...) is trusted.
	ClientQPS   float64
	ClientBurst int
	// TokenQPS and TokenBurst: requests per second of one token that
	// passed (a trainer), whatever its address.
	TokenQPS   float64
	TokenBurst int
	// ReviewQPS and ReviewBurst: TokenReviews per second of this replica,
	// whoever asks. A request that would exceed it gets 503 with
	// Retry-After, and the API server is not asked.
	ReviewQPS   float64
	ReviewBurst int
	// CacheSize is the most verdicts each of the two caches (positive,
	// negative) holds; CacheTTL and NegativeCacheTTL how long a verdict
	// is served.
	CacheSize                  int
	CacheTTL, NegativeCacheTTL time.Duration
}

// DefaultLimits are the manager's defaults. A trainer costs one review per
// CacheTTL and reports far less often than TokenQPS (its reports are
// coalesced to one write per second anyway); ReviewQPS stays well below the
// manager's client QPS, so a flood cannot crowd out the reconciler.
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

// Authorizer returns an Authorizer with l's cache and review budget.
func (l Limits) Authorizer(reviews authnclient.TokenReviewInterface, pods client.Reader) *Authorizer {
	return &Authorizer{Reviews: reviews, Pods: pods,
		CacheSize: l.CacheSize, CacheTTL: l.CacheTTL, NegativeCacheTTL: l.NegativeCacheTTL,
		Budget: NewReviewBudget(l.ReviewQPS, l.ReviewBurst)}
}

// ClientLimits returns the per-client limits of l, for Handler.
func (l Limits) ClientLimits() *ClientLimits {
	return &ClientLimits{byAddr: newKeyedLimiter(l.ClientQPS, l.ClientBurst), byToken: newKeyedLimiter(l.TokenQPS, l.TokenBurst)}
}

// ClientLimits are token buckets per source address and per token.
type ClientLimits struct {
	byAddr, byToken *keyedLimiter
}

func (c *ClientLimits) addr() *keyedLimiter {
	if c == nil {
		return nil
	}
	return c.byAddr
}

func (c *ClientLimits) token() *keyedLimiter {
	if c == nil {
		return nil
	}
	return c.byToken
}

// maxClients bounds the buckets kept per kind (least recently used go
// first; a forgotten client starts again with a full bucket).
const maxClients = 65536

// keyedLimiter is a token bucket per key, for at most maxClients keys.
type keyedLimiter struct {
	qps   rate.Limit
	burst int
	mu    sync.Mutex
	lru   *lru.Cache
}

func newKeyedLimiter(qps float64, burst int) *keyedLimiter {
	if qps <= 0 {
		return nil
	}
	return &keyedLimiter{qps: rate.Limit(qps), burst: burst, lru: lru.New(maxClients)}
}

// allow takes a token from key's bucket, or says when to come back.
func (k *keyedLimiter) allow(key any, now time.Time) (bool, time.Duration) {
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

// ReviewBudget bounds the TokenReviews per second of one replica. A quarter
// of the burst is kept for renewals: a token that passed before and whose
// verdict is being renewed may take the last reviews, a token never seen may
// not, so a flood of bogus tokens does not lock out the trainers that are
// already reporting.
type ReviewBudget struct {
	mu      sync.Mutex
	lim     *rate.Limiter
	reserve float64
}

// NewReviewBudget returns a budget of qps reviews per second, burst at
// once; nil (unbounded) when qps is 0.
func NewReviewBudget(qps float64, burst int) *ReviewBudget {
	if qps <= 0 {
		return nil
	}
	return &ReviewBudget{lim: rate.NewLimiter(rate.Limit(qps), burst), reserve: float64(burst / 4)}
}

// take spends one review, or says when to come back.
func (b *ReviewBudget) take(now time.Time, renewal bool) (bool, time.Duration) {
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

// sourceAddr is the IP address of the TCP peer (RemoteAddr, which no header
// changes: the server sits behind no proxy it could trust).
func sourceAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// retryAfter is the value of a Retry-After header: whole seconds, at least 1.
func retryAfter(d time.Duration) string {
	return strconv.Itoa(max(1, int(math.Ceil(d.Seconds()))))
}
