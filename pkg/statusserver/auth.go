package statusserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
	authnclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// The server reviews tokens with the API server and reads the pod a token is
// bound to.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch

// Keys of a pod-bound service account token's user extra, as the API server
// fills them in a TokenReview.
const (
	extraPodName = "authentication.kubernetes.io/pod-name"
	extraPodUID  = "authentication.kubernetes.io/pod-uid"
)

// Audience is the audience a trainer's token must carry to report the status
// of TrainJob ns/name (Kubeflow Trainer v2.3's value).
func Audience(ns, name string) string {
	return fmt.Sprintf("trainer.kubeflow.org/v1alpha1/namespaces/%s/trainjobs/%s/status", ns, name)
}

// errForbidden: the caller is authenticated but may not report for this job.
var errForbidden = errors.New("forbidden")

// identity is who a verified token speaks for.
type identity struct {
	namespace, pod string
	podUID         types.UID
}

// Authorizer decides whether a bearer token may report the status of a
// TrainJob. Two checks, both by the API server:
//   - authentication: a TokenReview with the job's audience, so only a token
//     issued for exactly this TrainJob passes;
//   - authorization: the token must be bound to a pod (a projected token, as
//     the kubelet makes them), that pod must still exist with the same UID, in
//     the job's namespace, and belong to the job's JobSet (label
//     jobset.sigs.k8s.io/jobset-name = the TrainJob's name).
//
// Kubeflow Trainer only compares the token's namespace with the URL's. The
// pod check also stops a pod of another job in the same namespace that asks
// for a token with this job's audience.
//
// Verdicts are cached (verdictCache: bounded, tokens hashed), positive ones
// for CacheTTL and negative ones for NegativeCacheTTL, so a chatty trainer
// costs one TokenReview and one pod read per TTL, not per report. Budget
// bounds the reviews per second; concurrent requests with the same token
// share one review.
type Authorizer struct {
	Reviews authnclient.TokenReviewInterface
	Pods    client.Reader
	// CacheTTL, NegativeCacheTTL and CacheSize: see Limits (0: the default).
	CacheTTL, NegativeCacheTTL time.Duration
	CacheSize                  int
	// Budget bounds the TokenReviews per second (nil: unbounded).
	Budget *ReviewBudget
	// Clock of the cache and the budget (tests; default the real one).
	Clock utilcache.Clock

	once     sync.Once
	cache    *verdictCache
	mu       sync.Mutex
	inflight map[cacheKey]*review
}

// review is one TokenReview (and pod read) in flight, which requests with
// the same key wait for instead of asking again.
type review struct {
	done chan struct{}
	err  error
}

// errThrottled: the review budget is spent; come back after RetryAfter.
type errThrottled struct{ RetryAfter time.Duration }

func (e *errThrottled) Error() string {
	return fmt.Sprintf("too many token reviews: retry after %v", e.RetryAfter.Round(time.Millisecond))
}

// reviewTimeout bounds one TokenReview and pod read, which run on behalf of
// every request waiting for them, whatever becomes of the first.
const reviewTimeout = 5 * time.Second

func (a *Authorizer) init() {
	a.once.Do(func() {
		if a.Clock == nil {
			a.Clock = realClock{}
		}
		a.cache = newVerdictCache(a.CacheSize, a.CacheTTL, a.NegativeCacheTTL, a.Clock)
		a.inflight = map[cacheKey]*review{}
	})
}

// lookup returns the cache key of token for job, and what the cache knows.
func (a *Authorizer) lookup(token string, job types.NamespacedName) (cacheKey, state, error) {
	a.init()
	k := a.cache.key(Audience(job.Namespace, job.Name), token)
	st, err := a.cache.get(k)
	return k, st, err
}

// Authorize returns nil when token may report for TrainJob job, an error
// wrapping errForbidden when it may not, an *errThrottled when the review
// budget is spent, or another error when the API server could not answer.
func (a *Authorizer) Authorize(ctx context.Context, token string, job types.NamespacedName) error {
	k, st, err := a.lookup(token, job)
	return a.decide(ctx, k, st, err, token, job)
}

// decide answers from the cache, or reviews the token.
func (a *Authorizer) decide(ctx context.Context, k cacheKey, st state, cached error, token string, job types.NamespacedName) error {
	switch st {
	case allowed:
		return nil
	case denied:
		return cached
	}
	a.mu.Lock()
	if r, ok := a.inflight[k]; ok {
		a.mu.Unlock()
		select {
		case <-r.done:
			return r.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	r := &review{done: make(chan struct{})}
	a.inflight[k] = r
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.inflight, k)
		a.mu.Unlock()
		close(r.done)
	}()

	if ok, after := a.Budget.take(a.Clock.Now(), st == stale); !ok {
		r.err = &errThrottled{RetryAfter: after}
		return r.err
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reviewTimeout)
	defer cancel()
	r.err = a.authorize(rctx, token, Audience(job.Namespace, job.Name), job)
	if r.err == nil || errors.Is(r.err, errForbidden) {
		a.cache.put(k, r.err)
	} // else not a verdict: try again next time
	return r.err
}

func (a *Authorizer) authorize(ctx context.Context, token, aud string, job types.NamespacedName) error {
	id, err := a.authenticate(ctx, token, aud)
	if err != nil {
		return err
	}
	if id.namespace != job.Namespace {
		return fmt.Errorf("%w: the token's service account is in namespace %q, not %q", errForbidden, id.namespace, job.Namespace)
	}
	var pod corev1.Pod
	if err := a.Pods.Get(ctx, types.NamespacedName{Namespace: id.namespace, Name: id.pod}, &pod); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("%w: the token's pod %s/%s no longer exists", errForbidden, id.namespace, id.pod)
		}
		return fmt.Errorf("reading the token's pod: %w", err)
	}
	if pod.UID != id.podUID {
		return fmt.Errorf("%w: the token's pod %s/%s no longer exists", errForbidden, id.namespace, id.pod)
	}
	if got := pod.Labels[jobsetv1alpha2.JobSetNameKey]; got != job.Name {
		return fmt.Errorf("%w: pod %s/%s does not belong to TrainJob %s", errForbidden, id.namespace, id.pod, job.Name)
	}
	return nil
}

// authenticate asks the API server whether token is valid for aud, and whose
// pod it is bound to.
func (a *Authorizer) authenticate(ctx context.Context, token, aud string) (identity, error) {
	tr, err := a.Reviews.Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{aud}},
	}, metav1.CreateOptions{})
	if err != nil {
		return identity{}, fmt.Errorf("reviewing the token: %w", err)
	}
	st := tr.Status
	if !st.Authenticated {
		return identity{}, fmt.Errorf("%w: the token is not valid for audience %q", errForbidden, aud)
	}
	if !contains(st.Audiences, aud) {
		return identity{}, fmt.Errorf("%w: the token is not valid for audience %q", errForbidden, aud)
	}
	parts := strings.Split(st.User.Username, ":")
	if len(parts) != 4 || parts[0] != "system" || parts[1] != "serviceaccount" {
		return identity{}, fmt.Errorf("%w: %q is not a service account", errForbidden, st.User.Username)
	}
	pod, uid := st.User.Extra[extraPodName], st.User.Extra[extraPodUID]
	if len(pod) != 1 || len(uid) != 1 {
		return identity{}, fmt.Errorf("%w: the token is not bound to a pod", errForbidden)
	}
	return identity{namespace: parts[2], pod: pod[0], podUID: types.UID(uid[0])}, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
