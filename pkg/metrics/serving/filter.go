package serving

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// withAuthenticationAndAuthorization is controller-runtime's
// filters.WithAuthenticationAndAuthorization (same reviews, caches and
// retries) with one difference: a token the API server rejects with an error
// (malformed, expired, issued by another cluster) gets 401, as the API server
// itself answers it, instead of 500. A scraper with a stale token should see
// that its credentials are wrong, and an alert on 5xx should not fire for it.
// Authorization errors stay 500: the API server could not decide.
func withAuthenticationAndAuthorization(config *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	tokenReviews, err := authenticationv1.NewForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, err
	}
	accessReviews, err := authorizationv1.NewForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, err
	}
	// k8s.io/apiserver's default retry of authentication and authorization
	// webhooks (options.DefaultAuthWebhookRetryBackoff), as controller-runtime uses.
	backoff := &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
	authn, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous:                &apiserver.AnonymousAuthConfig{Enabled: false},
		CacheTTL:                 time.Minute,
		TokenAccessReviewClient:  tokenReviews,
		TokenAccessReviewTimeout: 10 * time.Second,
		WebhookRetryBackoff:      backoff,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("metrics authentication: %w", err)
	}
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: accessReviews,
		AllowCacheTTL:             5 * time.Minute,
		DenyCacheTTL:              30 * time.Second,
		WebhookRetryBackoff:       backoff,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("metrics authorization: %w", err)
	}
	return func(log logr.Logger, handler http.Handler) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			res, ok, err := authn.AuthenticateRequest(req)
			if err != nil || !ok {
				if err != nil {
					log.V(1).Info("Metrics request not authenticated", "error", err.Error())
				}
				http.Error(w, "Unauthorized", http.StatusUnauthorized)
				return
			}
			attrs := authorizer.AttributesRecord{User: res.User, Verb: strings.ToLower(req.Method), Path: req.URL.Path}
			decision, reason, err := authz.Authorize(req.Context(), attrs)
			if err != nil {
				log.Error(err, "Authorizing a metrics request", "user", res.User.GetName())
				http.Error(w, "Authorization failed", http.StatusInternalServerError)
				return
			}
			if decision != authorizer.DecisionAllow {
				log.V(4).Info("Metrics request forbidden", "user", res.User.GetName(), "reason", reason)
				http.Error(w, fmt.Sprintf("Forbidden: %s may not get %s", res.User.GetName(), req.URL.Path), http.StatusForbidden)
				return
			}
			handler.ServeHTTP(w, req)
		}), nil
	}, nil
}
