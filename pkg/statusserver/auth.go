package statusserver

import (
	"context"
	"crypto/sha256"
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
// Verdicts are cached by token for CacheTTL, so a chatty trainer costs one
// TokenReview and one pod read per TTL, not per report.
type Authorizer struct {
	Reviews  authnclient.TokenReviewInterface
	Pods     client.Reader
	CacheTTL time.Duration

	mu    sync.Mutex
	cache map[[sha256.Size]byte]verdict
}

type verdict struct {
	err     error
	expires time.Time
}

// Authorize returns nil when token may report for TrainJob job, an error
// wrapping errForbidden when it may not, or another error when the API server
// could not answer.
func (a *Authorizer) Authorize(ctx context.Context, token string, job types.NamespacedName) error {
	aud := Audience(job.Namespace, job.Name)
	key := sha256.Sum256([]byte(aud + "\x00" + token))
	now := time.Now()
	a.mu.Lock()
	if v, ok := a.cache[key]; ok && now.Before(v.expires) {
		a.mu.Unlock()
		return v.err
	}
	a.mu.Unlock()

	err := a.authorize(ctx, token, aud, job)
	if err != nil && !errors.Is(err, errForbidden) {
		return err // not a verdict: try again next time
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cache == nil {
		a.cache = map[[sha256.Size]byte]verdict{}
	}
	for k, v := range a.cache { // few entries (one per trainer pod): sweep on write
		if !now.Before(v.expires) {
			delete(a.cache, k)
		}
	}
	a.cache[key] = verdict{err: err, expires: now.Add(a.CacheTTL)}
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
