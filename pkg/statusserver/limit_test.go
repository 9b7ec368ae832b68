package statusserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	authnclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/reviewlimit"
)

// fakeClock is a settable clock for the cache and the review budget.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// fakeReviews answers TokenReviews as the API server does for the tokens
// "good" (bound to pod ns/mnist-0 of TrainJob mnist) and counts them; any
// other token is not authenticated. gate, when set, holds each review until
// it is closed.
type fakeReviews struct {
	authnclient.TokenReviewInterface
	n    atomic.Int64
	gate chan struct{}
}

func (f *fakeReviews) Create(_ context.Context, tr *authenticationv1.TokenReview, _ metav1.CreateOptions) (*authenticationv1.TokenReview, error) {
	f.n.Add(1)
	if f.gate != nil {
		<-f.gate
	}
	out := tr.DeepCopy()
	podTokensMu.Lock()
	uid, ok := podTokens[tr.Spec.Token]
	podTokensMu.Unlock()
	if ok {
		out.Status = authenticationv1.TokenReviewStatus{Authenticated: true, Audiences: tr.Spec.Audiences,
			User: authenticationv1.UserInfo{Username: "system:serviceaccount:ns:trainer", Extra: map[string]authenticationv1.ExtraValue{
				extraPodName: {"mnist-0"}, extraPodUID: {uid}}}}
		return out, nil
	}
	if tr.Spec.Token == "good" {
		out.Status = authenticationv1.TokenReviewStatus{Authenticated: true, Audiences: tr.Spec.Audiences,
			User: authenticationv1.UserInfo{Username: "system:serviceaccount:ns:trainer", Extra: map[string]authenticationv1.ExtraValue{
				extraPodName: {"mnist-0"}, extraPodUID: {"uid-0"}}}}
	}
	return out, nil
}

var mnist = types.NamespacedName{Namespace: "ns", Name: "mnist"}

// podTokens are the tokens podToken made, by the UID of the pod they are
// bound to; fakeReviews authenticates them.
var (
	podTokensMu sync.Mutex
	podTokens   = map[string]string{}
)

// podToken is a token shaped as the API server issues projected service
// account tokens (unsigned): service account ns/trainer, pod mnist-0 of UID
// uid, a serial of its own.
func podToken(uid string, serial int) string {
	claims, _ := json.Marshal(map[string]any{"sub": "system:serviceaccount:ns:trainer", "jti": fmt.Sprint(serial),
		"kubernetes.io": map[string]any{"pod": map[string]any{"name": "mnist-0", "uid": uid}}})
	enc := base64.RawURLEncoding.EncodeToString
	tok := enc([]byte(`{"alg":"RS256"}`)) + "." + enc(claims) + ".sig"
	podTokensMu.Lock()
	defer podTokensMu.Unlock()
	podTokens[tok] = uid
	return tok
}

func newTestAuthorizer(t *testing.T, rev *fakeReviews, clock *fakeClock) *Authorizer {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mnist-0", UID: "uid-0",
		Labels: map[string]string{"jobset.sigs.k8s.io/jobset-name": "mnist"}}}
	return &Authorizer{Reviews: rev, Pods: fake.NewClientBuilder().WithObjects(pod).Build(), Clock: clock,
		CacheSize: 4, CacheTTL: time.Minute, NegativeCacheTTL: 10 * time.Second}
}

// TestVerdictCache: bounded, positive and negative TTLs, a flood of bogus
// tokens does not evict a trainer's verdict, and no token is kept raw.
func TestVerdictCache(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	rev := &fakeReviews{}
	a := newTestAuthorizer(t, rev, clock)
	if err := a.Authorize(context.Background(), "good", mnist); err != nil {
		t.Fatalf("good token: %v", err)
	}
	for i := 0; i < 100; i++ {
		if err := a.Authorize(context.Background(), fmt.Sprintf("bogus-%d", i), mnist); !errors.Is(err, errForbidden) {
			t.Fatalf("bogus token: %v, want forbidden", err)
		}
	}
	if n := rev.n.Load(); n != 101 {
		t.Fatalf("%d reviews, want 101", n)
	}
	if pos, neg := a.guard.Cache().Len(); pos != 1 || neg != 4 {
		t.Errorf("cache holds %d positive and %d negative verdicts, want 1 and 4 (the size)", pos, neg)
	}
	pos, neg := a.guard.Cache().Keys()
	for _, k := range append(pos, neg...) {
		if _, ok := k.(reviewlimit.Key); !ok {
			t.Errorf("cache key of type %T, want a keyed hash", k)
		}
	}
	// Cached: the good token and the latest bogus one cost nothing.
	_ = a.Authorize(context.Background(), "good", mnist)
	_ = a.Authorize(context.Background(), "bogus-99", mnist)
	if n := rev.n.Load(); n != 101 {
		t.Errorf("%d reviews after cached verdicts, want 101", n)
	}
	// Negative verdicts expire first.
	clock.step(11 * time.Second)
	_ = a.Authorize(context.Background(), "bogus-99", mnist)
	_ = a.Authorize(context.Background(), "good", mnist)
	if n := rev.n.Load(); n != 102 {
		t.Errorf("%d reviews 11s later, want 102 (the bogus token again, not the good one)", n)
	}
	// A positive verdict is stale after its TTL, and forgotten after twice it.
	k, st := a.lookup("good", mnist)
	if st != reviewlimit.Allowed {
		t.Errorf("good token 11s later: state %v, want allowed", st)
	}
	clock.step(time.Minute)
	if _, st = a.lookup("good", mnist); st != reviewlimit.Stale {
		t.Errorf("good token 71s later: state %v, want stale", st)
	}
	clock.step(time.Minute)
	if _, st = a.lookup("good", mnist); st != reviewlimit.Unknown {
		t.Errorf("good token 131s later: state %v, want unknown", st)
	}
	if k2, _ := a.lookup("good", types.NamespacedName{Namespace: "ns", Name: "other"}); k2 == k {
		t.Error("the same key for two audiences")
	}
}

// TestReviewBudget: N distinct bogus tokens cost at most the budget's burst
// (less the reserve) at once and its rate after; the rest are throttled
// without a review; a renewal may use the reserve.
func TestReviewBudget(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	rev := &fakeReviews{}
	a := newTestAuthorizer(t, rev, clock)
	a.Budget = NewReviewBudget(10, 8) // reserve 2
	if err := a.Authorize(context.Background(), "good", mnist); err != nil {
		t.Fatal(err)
	}
	throttled := 0
	for i := 0; i < 1000; i++ {
		err := a.Authorize(context.Background(), fmt.Sprintf("bogus-%d", i), mnist)
		var th *errThrottled
		if errors.As(err, &th) {
			throttled++
			if th.RetryAfter <= 0 {
				t.Fatalf("retry after %v", th.RetryAfter)
			}
		}
	}
	if n := rev.n.Load(); n != 6 {
		t.Errorf("%d reviews for 1 good and 1000 bogus tokens at once, want 6 (burst 8 less the reserve of 2)", n)
	}
	if throttled != 995 {
		t.Errorf("%d throttled, want 995", throttled)
	}
	// Half a second later: 5 more (10/s).
	clock.step(500 * time.Millisecond)
	for i := 0; i < 1000; i++ {
		_ = a.Authorize(context.Background(), fmt.Sprintf("later-%d", i), mnist)
	}
	if n := rev.n.Load(); n != 11 {
		t.Errorf("%d reviews half a second later, want 11", n)
	}
	// The good token's verdict goes stale during a flood that spent all
	// but the reserve: its renewal takes from the reserve.
	clock.step(time.Minute)
	for i := 0; i < 1000; i++ {
		_ = a.Authorize(context.Background(), fmt.Sprintf("again-%d", i), mnist)
	}
	if _, st := a.lookup("good", mnist); st != reviewlimit.Stale {
		t.Fatalf("good token a minute later: state %v, want stale", st)
	}
	if err := a.Authorize(context.Background(), "good", mnist); err != nil {
		t.Errorf("renewal of the good token during the flood: %v", err)
	}
}

// TestConcurrentReviewsShared: concurrent requests with one token cost one
// review.
func TestConcurrentReviewsShared(t *testing.T) {
	rev := &fakeReviews{gate: make(chan struct{})}
	a := newTestAuthorizer(t, rev, &fakeClock{now: time.Unix(1e9, 0)})
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- a.Authorize(context.Background(), "bogus", mnist) }()
	}
	for rev.n.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // the others queue behind the first
	close(rev.gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, errForbidden) {
			t.Errorf("Authorize = %v, want forbidden", err)
		}
	}
	if n := rev.n.Load(); n != 1 {
		t.Errorf("%d reviews for 20 concurrent requests with one token, want 1", n)
	}
}

// TestHandlerClientLimits: per source address before a token passed (429 with
// Retry-After, without a review), per token after, whatever the address.
func TestHandlerClientLimits(t *testing.T) {
	rev := &fakeReviews{}
	a := newTestAuthorizer(t, rev, &fakeClock{now: time.Unix(1e9, 0)})
	a.Clock = nil // the real clock, as the handler's limiters use
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mnist"}}
	scheme := runtime.NewScheme()
	if err := trainer.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	h := &Handler{Auth: a, Jobs: fake.NewClientBuilder().WithScheme(scheme).WithObjects(tj).Build(),
		Coalescer: &Coalescer{Write: func(context.Context, types.NamespacedName, *trainer.TrainerStatus) error { return nil }},
		Limits:    Limits{ClientQPS: 0.01, ClientBurst: 3, TokenQPS: 0.01, TokenBurst: 5}.ClientLimits()}
	mux := h.ServeMux()
	post := func(addr, token string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, Path("ns", "mnist"), strings.NewReader(`{}`))
		r.RemoteAddr = addr + ":40000"
		r.Header.Set("X-Forwarded-For", "10.9.9.9") // not trusted
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		return w
	}
	var codes []int
	for i := 0; i < 5; i++ {
		codes = append(codes, post("10.0.0.1", fmt.Sprintf("bogus-%d", i)).Code)
	}
	if want := []int{403, 403, 403, 429, 429}; fmt.Sprint(codes) != fmt.Sprint(want) {
		t.Errorf("bogus tokens from one address: %v, want %v", codes, want)
	}
	if n := rev.n.Load(); n != 3 {
		t.Errorf("%d reviews, want 3: a throttled request costs none", n)
	}
	w := post("10.0.0.1", "")
	if w.Code != 429 || w.Header().Get("Retry-After") != "100" {
		t.Errorf("no token from the throttled address: %d, Retry-After %q; want 429, 100 (one request at 0.01/s)", w.Code, w.Header().Get("Retry-After"))
	}
	if w := post("10.0.0.2", ""); w.Code != 401 {
		t.Errorf("another address: %d, want 401", w.Code)
	}
	// The good token passes from the throttled address (first via a new
	// one), then counts per token: its burst of 5, whatever the address.
	if w := post("10.0.0.3", "good"); w.Code != 200 {
		t.Fatalf("good token: %d %s", w.Code, w.Body)
	}
	codes = codes[:0]
	for i := 0; i < 6; i++ {
		codes = append(codes, post(fmt.Sprintf("10.0.1.%d", i), "good").Code)
	}
	if want := []int{200, 200, 200, 200, 200, 429}; fmt.Sprint(codes) != fmt.Sprint(want) {
		t.Errorf("good token from 6 addresses: %v, want %v", codes, want)
	}
}

// TestHandlerReviewBudget: over the review budget, 503 with Retry-After.
func TestHandlerReviewBudget(t *testing.T) {
	rev := &fakeReviews{}
	a := newTestAuthorizer(t, rev, &fakeClock{now: time.Unix(1e9, 0)})
	a.Budget = NewReviewBudget(0.5, 1)
	h := &Handler{Auth: a}
	mux := h.ServeMux()
	var codes []int
	var after string
	for i := 0; i < 3; i++ {
		r := httptest.NewRequest(http.MethodPost, Path("ns", "mnist"), strings.NewReader(`{}`))
		r.Header.Set("Authorization", fmt.Sprintf("Bearer bogus-%d", i))
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		codes = append(codes, w.Code)
		after = w.Header().Get("Retry-After")
	}
	if fmt.Sprint(codes) != "[403 503 503]" || after != "2" {
		t.Errorf("3 bogus tokens with a budget of 1 and 0.5/s: %v, Retry-After %q; want [403 503 503], 2", codes, after)
	}
}

func TestLimitsValidate(t *testing.T) {
	if err := DefaultLimits().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	for _, l := range []Limits{{ClientQPS: -1}, {TokenQPS: 1}, {ReviewQPS: 5, ReviewBurst: 0}, {CacheTTL: -time.Second}} {
		if l.Validate() == nil {
			t.Errorf("%+v: no error", l)
		}
	}
}

// TestRenewedTokenDuringFlood (issue #40): a new token of a trainer's pod
// (its projected token, renewed) is reviewed from the budget's reserve while
// a flood of bogus tokens has spent the rest, as a stale verdict's renewal
// is; a new token of another pod is not. Before, the renewed token was a
// stranger's and got 503 (throttled) until the flood ended.
func TestRenewedTokenDuringFlood(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	rev := &fakeReviews{}
	a := newTestAuthorizer(t, rev, clock)
	a.Budget = NewReviewBudget(10, 8) // reserve 2
	first, renewed := podToken("uid-0", 1), podToken("uid-0", 2)
	if err := a.Authorize(context.Background(), first, mnist); err != nil {
		t.Fatalf("the trainer's first token: %v", err)
	}
	for i := 0; i < 100; i++ {
		_ = a.Authorize(context.Background(), fmt.Sprintf("bogus-%d", i), mnist)
	}
	if err := a.Authorize(context.Background(), renewed, mnist); err != nil {
		t.Errorf("the trainer's renewed token during the flood: %v, want it reviewed from the reserve and passed", err)
	}
	var th *errThrottled
	if err := a.Authorize(context.Background(), podToken("uid-9", 1), mnist); !errors.As(err, &th) {
		t.Errorf("another pod's new token during the flood: %v, want throttled", err)
	}
}
