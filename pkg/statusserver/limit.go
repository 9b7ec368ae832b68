package statusserver

import (
	authnclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainyard/trainyard/pkg/reviewlimit"
)

// The status server's limits are pkg/reviewlimit's, which the metrics
// endpoint shares (docs/progress.md, "Limits").
type (
	// Limits bound what a client of the status server may cost.
	Limits = reviewlimit.Limits
	// ClientLimits are token buckets per source address and per token.
	ClientLimits = reviewlimit.ClientLimits
	// ReviewBudget bounds the TokenReviews per second of one replica.
	ReviewBudget = reviewlimit.Budget
)

// Defaults of the verdict cache (Limits).
const (
	DefaultCacheSize        = reviewlimit.DefaultCacheSize
	DefaultCacheTTL         = reviewlimit.DefaultCacheTTL
	DefaultNegativeCacheTTL = reviewlimit.DefaultNegativeCacheTTL
)

// DefaultLimits are the manager's defaults.
func DefaultLimits() Limits { return reviewlimit.DefaultLimits() }

// NewReviewBudget returns a budget of qps reviews per second, burst at
// once; nil (unbounded) when qps is 0.
func NewReviewBudget(qps float64, burst int) *ReviewBudget { return reviewlimit.NewBudget(qps, burst) }

// NewAuthorizer returns an Authorizer with l's cache and review budget.
func NewAuthorizer(l Limits, reviews authnclient.TokenReviewInterface, pods client.Reader) *Authorizer {
	return &Authorizer{Reviews: reviews, Pods: pods,
		CacheSize: l.CacheSize, CacheTTL: l.CacheTTL, NegativeCacheTTL: l.NegativeCacheTTL,
		Budget: l.Budget()}
}
