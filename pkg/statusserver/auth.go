package statusserver

import (
	"context"
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

	"github.com/trainyard/trainyard/pkg/reviewlimit"
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

// errForbidden: the caller is authenticated but may not report for this job
// (a negative verdict, cached).
var errForbidden = reviewlimit.ErrDenied

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
// Verdicts are cached and reviews bounded by a reviewlimit.Guard: positive
// verdicts for CacheTTL and negative ones for NegativeCacheTTL, so a chatty
// trainer costs one TokenReview and one pod read per TTL, not per report;
// Budget bounds the reviews per second; concurrent requests with the same
// token share one review; a trainer's renewed token is a renewal.
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

	once  sync.Once
	guard *reviewlimit.Guard[struct{}]
}

// errThrottled: a limit refused the request; come back after RetryAfter.
type errThrottled = reviewlimit.Throttled

func (a *Authorizer) init() {
	a.once.Do(func() {
		a.guard = reviewlimit.NewGuard[struct{}](a.CacheSize, a.CacheTTL, a.NegativeCacheTTL, a.Budget, a.Clock)
	})
}

// lookup returns the cache key of token for job, and what the cache knows.
func (a *Authorizer) lookup(token string, job types.NamespacedName) (reviewlimit.Key, reviewlimit.State) {
	a.init()
	return a.guard.Lookup(Audience(job.Namespace, job.Name), token)
}

// Authorize returns nil when token may report for TrainJob job, an error
// wrapping errForbidden when it may not, an *errThrottled when the review
// budget is spent, or another error when the API server could not answer.
func (a *Authorizer) Authorize(ctx context.Context, token string, job types.NamespacedName) error {
	return a.check(ctx, "", token, job, nil)
}

// check is Authorize with the per-client limits of clients for a request
// from addr.
func (a *Authorizer) check(ctx context.Context, addr, token string, job types.NamespacedName, clients *ClientLimits) error {
	a.init()
	aud := Audience(job.Namespace, job.Name)
	_, err := a.guard.Check(ctx, addr, aud, token, clients, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, a.authorize(ctx, token, aud, job)
	})
	return err
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
