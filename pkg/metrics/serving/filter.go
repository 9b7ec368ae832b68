package serving

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
func withAuthenticationAndAuthorization(config *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	tokens, err := authenticationv1.NewForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, fmt.Errorf("metrics authentication client: %w", err)
	}
	access, err := authorizationv1.NewForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, fmt.Errorf("metrics authorization client: %w", err)
	}
	r := newReviews(tokens.TokenReviews(), access.SubjectAccessReviews(), reviewBackoff)
	return r.filter, nil
}

// reviews asks the API server and remembers its answers.
type reviews struct {
	tokens  tokenReviewer
	access  accessReviewer
	backoff wait.Backoff
	// users maps a token's hash to what its TokenReview said.
	users *cache.LRUExpireCache
	// decisions maps an accessKey to the SubjectAccessReview's answer.
	decisions *cache.LRUExpireCache
}

func newReviews(tokens tokenReviewer, access accessReviewer, backoff wait.Backoff) *reviews {
	return &reviews{
		tokens:    tokens,
		access:    access,
		backoff:   backoff,
		users:     cache.NewLRUExpireCache(reviewCacheLen),
		decisions: cache.NewLRUExpireCache(reviewCacheLen),
	}
}

// authentication is what a TokenReview said about a token.
type authentication struct {
	ok   bool
	user authnv1.UserInfo
	// reason is the API server's error for a rejected token.
	reason string
}

// decision is what a SubjectAccessReview said.
type decision struct {
	allowed bool
	reason  string
}

func (r *reviews) filter(log logr.Logger, handler http.Handler) (http.Handler, error) {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		token, found := bearerToken(req)
		if !found {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		authn, err := r.authenticate(req.Context(), token)
		if err != nil || !authn.ok {
			if err == nil {
				err = errors.New(authn.reason)
			}
			log.V(1).Info("Metrics request not authenticated", "error", err.Error())
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
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

// authenticate reviews a token, or answers from a review of the last minute
// (accepted and rejected tokens alike; failed reviews are not kept).
func (r *reviews) authenticate(ctx context.Context, token string) (authentication, error) {
	sum := sha256.Sum256([]byte(token))
	key := hex.EncodeToString(sum[:])
	if v, ok := r.users.Get(key); ok {
		return v.(authentication), nil
	}
	review := &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}
	got, err := retry(ctx, r.backoff, func(ctx context.Context) (*authnv1.TokenReview, error) {
		return r.tokens.Create(ctx, review, metav1.CreateOptions{})
	})
	if err != nil {
		return authentication{}, fmt.Errorf("reviewing the token: %w", err)
	}
	a := authentication{ok: got.Status.Authenticated && got.Status.Error == "", user: got.Status.User, reason: got.Status.Error}
	if !a.ok && a.reason == "" {
		a.reason = "token not authenticated"
	}
	r.users.Add(key, a, tokenTTL)
	return a, nil
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
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return code == http.StatusTooManyRequests || code >= http.StatusInternalServerError
	}
	return true
}
