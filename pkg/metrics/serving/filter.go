package serving

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apimachinery/pkg/util/wait"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/trainyard/trainyard/pkg/reviewlimit"
)

// How long answers are kept and how often a failed review is retried: the
// values controller-runtime's filters.WithAuthenticationAndAuthorization
// gives k8s.io/apiserver's delegating authenticator and authorizer, so a
// scraper polling every few seconds costs the API server about one review a
// minute.
const (
	tokenTTL       = time.Minute
	allowTTL       = 5 * time.Minute
	denyTTL        = 30 * time.Second
	reviewTimeout  = 10 * time.Second
	reviewCacheLen = 1024
)

// Limits are what a scraper may cost: the status server's protection
// (pkg/reviewlimit, docs/progress.md "Limits") with its default budgets — a
// token never seen costs a TokenReview, and anyone who can reach the port
// may send one, so requests are limited per source address until their
// token passed and per token after, TokenReviews per second for everyone
// together, a quarter of them kept for renewals (Prometheus' projected token
// rotates too) — and the delegating authenticator's cache: a verdict of a
// minute, at most 1024 of each kind.
func Limits() reviewlimit.Limits {
	l := reviewlimit.DefaultLimits()
	l.CacheSize, l.CacheTTL = reviewCacheLen, tokenTTL
	return l
}

// reviewBackoff retries a review the API server could not answer (5xx, 429,
// no connection), as the delegating authenticator's default does.
var reviewBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}

// tokenReviewer and accessReviewer are the client-go calls the filter makes.
type tokenReviewer interface {
	Create(context.Context, *authnv1.TokenReview, metav1.CreateOptions) (*authnv1.TokenReview, error)
}

type accessReviewer interface {
	Create(context.Context, *authzv1.SubjectAccessReview, metav1.CreateOptions) (*authzv1.SubjectAccessReview, error)
}

// withAuthenticationAndAuthorization lets a request through when the API
// server authenticates its bearer token (TokenReview) and authorizes the
// token's user for the request's verb on its path (SubjectAccessReview of a
// non-resource URL). It answers as the API server itself would: 401 for a
// missing or rejected token (a scraper with a stale token should see that its
// credentials are wrong, and an alert on 5xx should not fire for it), 403 for
// a user not allowed, 500 when the API server could not decide.
//
// It is written against client-go alone, not with k8s.io/apiserver's
// delegating authenticator and authorizer as controller-runtime's filter is:
// those bring about 250 packages (CEL, gRPC, OpenTelemetry) whose code and
// package initialization cost the manager about 20 MiB of memory for two
// HTTP calls and a cache.
func withAuthenticationAndAuthorization(config *rest.Config, httpClient *http.Client, limits reviewlimit.Limits) (metricsserver.Filter, error) {
	tokens, err := authenticationv1.NewForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, fmt.Errorf("metrics authentication client: %w", err)
	}
	access, err := authorizationv1.NewForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, fmt.Errorf("metrics authorization client: %w", err)
	}
	r := newReviews(tokens.TokenReviews(), access.SubjectAccessReviews(), reviewBackoff, limits)
	return r.filter, nil
}

// reviews asks the API server and remembers its answers.
type reviews struct {
	tokens  tokenReviewer
	access  accessReviewer
	backoff wait.Backoff
	// users caches what TokenReviews said, within the limits.
	users   *reviewlimit.Guard[authnv1.UserInfo]
	clients *reviewlimit.ClientLimits
	// decisions maps an accessKey to the SubjectAccessReview's answer.
	decisions *cache.LRUExpireCache
}

func newReviews(tokens tokenReviewer, access accessReviewer, backoff wait.Backoff, limits reviewlimit.Limits) *reviews {
	users := reviewlimit.NewGuardFor[authnv1.UserInfo](limits, nil)
	// A review with its retries (reviewBackoff: five tries within about 4 s
	// of waiting, each bounded by reviewTimeout).
	users.SetReviewTimeout(30 * time.Second)
	return &reviews{
		tokens:    tokens,
		access:    access,
		backoff:   backoff,
		users:     users,
		clients:   limits.ClientLimits(),
		decisions: cache.NewLRUExpireCache(reviewCacheLen),
	}
}

// metricsScope is the scope of the metrics endpoint's verdicts (any audience
// the API server accepts).
const metricsScope = "metrics"

// decision is what a SubjectAccessReview said.
type decision struct {
	allowed bool
	reason  string
}

func (r *reviews) filter(log logr.Logger, handler http.Handler) (http.Handler, error) {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		token, found := bearerToken(req)
		if !found {
			if ok, after := r.clients.Addr().Allow(reviewlimit.SourceAddr(req), time.Now()); !ok {
				throttled(w, &reviewlimit.Throttled{RetryAfter: after})
				return
			}
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		user, err := r.authenticate(req.Context(), reviewlimit.SourceAddr(req), token)
		var th *reviewlimit.Throttled
		switch {
		case errors.As(err, &th):
			log.V(1).Info("Metrics request throttled", "error", err.Error())
			throttled(w, th)
			return
		case err != nil:
			log.V(1).Info("Metrics request not authenticated", "error", err.Error())
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		authn := authentication{user: user}
		d, err := r.authorize(req.Context(), authn.user, strings.ToLower(req.Method), req.URL.Path)
		if err != nil {
			log.Error(err, "Authorizing a metrics request", "user", authn.user.Username)
			http.Error(w, "Authorization failed", http.StatusInternalServerError)
			return
		}
		if !d.allowed {
			log.V(4).Info("Metrics request forbidden", "user", authn.user.Username, "reason", d.reason)
			http.Error(w, fmt.Sprintf("Forbidden: %s may not get %s", authn.user.Username, req.URL.Path), http.StatusForbidden)
			return
		}
		handler.ServeHTTP(w, req)
	}), nil
}

// bearerToken is the token of an "Authorization: Bearer" header.
func bearerToken(req *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(req.Header.Get("Authorization")), " ")
	token = strings.TrimSpace(token)
	return token, ok && strings.EqualFold(scheme, "bearer") && token != ""
}

// authentication is who a TokenReview said a token is.
type authentication struct{ user authnv1.UserInfo }

// throttled answers a request refused by a limit: 429 (this client sends
// too much) or 503 (the review budget is spent), with Retry-After.
func throttled(w http.ResponseWriter, th *reviewlimit.Throttled) {
	w.Header().Set("Retry-After", reviewlimit.RetryAfter(th.RetryAfter))
	http.Error(w, http.StatusText(th.StatusCode()), th.StatusCode())
}

// authenticate reviews a token sent from addr, or answers from a review of
// the last minute (accepted tokens; rejected ones for NegativeCacheTTL;
// failed reviews are not kept), within the limits: a *reviewlimit.Throttled
// when one refuses, an error wrapping reviewlimit.ErrDenied for a token the
// API server rejects. A review the API server could not answer is retried
// with backoff, each retry spending from the review budget too.
func (r *reviews) authenticate(ctx context.Context, addr, token string) (authnv1.UserInfo, error) {
	return r.users.Check(ctx, addr, metricsScope, token, r.clients, func(ctx context.Context) (authnv1.UserInfo, error) {
		review := &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}
		first := true
		got, err := retry(ctx, r.backoff, func(ctx context.Context) (*authnv1.TokenReview, error) {
			if !first {
				if ok, after := r.users.Spend(); !ok {
					return nil, &reviewlimit.Throttled{RetryAfter: after, Budget: true}
				}
			}
			first = false
			return r.tokens.Create(ctx, review, metav1.CreateOptions{})
		})
		if err != nil {
			return authnv1.UserInfo{}, fmt.Errorf("reviewing the token: %w", err)
		}
		if !got.Status.Authenticated || got.Status.Error != "" {
			reason := got.Status.Error
			if reason == "" {
				reason = "token not authenticated"
			}
			return authnv1.UserInfo{}, fmt.Errorf("%w: %s", reviewlimit.ErrDenied, reason)
		}
		return got.Status.User, nil
	})
}

// accessKey names a SubjectAccessReview's question.
type accessKey struct {
	User   string              `json:"u"`
	UID    string              `json:"i"`
	Groups []string            `json:"g"`
	Extra  map[string][]string `json:"e"`
	Verb   string              `json:"v"`
	Path   string              `json:"p"`
}

// authorize asks whether user may verb path, or answers from a review of the
// last 5 minutes (allowed) or 30 seconds (not allowed).
func (r *reviews) authorize(ctx context.Context, user authnv1.UserInfo, verb, path string) (decision, error) {
	extra := make(map[string][]string, len(user.Extra))
	for k, v := range user.Extra {
		extra[k] = v
	}
	groups := slices.Clone(user.Groups)
	slices.Sort(groups)
	// JSON names every field, so no two questions share a key.
	b, err := json.Marshal(accessKey{User: user.Username, UID: user.UID, Groups: groups, Extra: extra, Verb: verb, Path: path})
	if err != nil {
		return decision{}, fmt.Errorf("the access review's key: %w", err)
	}
	key := string(b)
	if v, ok := r.decisions.Get(key); ok {
		return v.(decision), nil
	}
	sarExtra := make(map[string]authzv1.ExtraValue, len(user.Extra))
	for k, v := range user.Extra {
		sarExtra[k] = authzv1.ExtraValue(v)
	}
	review := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User:                  user.Username,
		UID:                   user.UID,
		Groups:                user.Groups,
		Extra:                 sarExtra,
		NonResourceAttributes: &authzv1.NonResourceAttributes{Path: path, Verb: verb},
	}}
	got, err := retry(ctx, r.backoff, func(ctx context.Context) (*authzv1.SubjectAccessReview, error) {
		return r.access.Create(ctx, review, metav1.CreateOptions{})
	})
	if err != nil {
		return decision{}, fmt.Errorf("reviewing %s's access to %s %s: %w", user.Username, verb, path, err)
	}
	// Denied and no opinion both mean no: nothing else authorizes here.
	d := decision{allowed: got.Status.Allowed && !got.Status.Denied, reason: got.Status.Reason}
	ttl := denyTTL
	if d.allowed {
		ttl = allowTTL
	}
	r.decisions.Add(key, d, ttl)
	return d, nil
}

// retry calls create, each try bounded by reviewTimeout, until it succeeds,
// fails in a way a retry cannot fix, or the backoff's steps run out.
func retry[T any](ctx context.Context, backoff wait.Backoff, create func(context.Context) (T, error)) (T, error) {
	var got T
	var last error
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		tryCtx, cancel := context.WithTimeout(ctx, reviewTimeout)
		defer cancel()
		got, last = create(tryCtx)
		switch {
		case last == nil:
			return true, nil
		case retriable(last):
			return false, nil
		default:
			return false, last
		}
	})
	if err != nil && last != nil {
		return got, last
	}
	return got, err
}

// retriable tells whether the API server may answer a review it failed: it
// was busy or failing (429, 5xx) or could not be reached. A refusal of the
// review itself (403: the manager may not create reviews, 400) is final.
func retriable(err error) bool {
	var th *reviewlimit.Throttled
	if errors.As(err, &th) {
		return false // the budget is spent: retrying would only spend more
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return code == http.StatusTooManyRequests || code >= http.StatusInternalServerError
	}
	return true
}
