package serving

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
)

// fakeTokens answers TokenReviews from a map of tokens to users, after
// failing the first len(fail) calls with those errors.
type fakeTokens struct {
	users map[string]authnv1.UserInfo
	fail  []error
	calls int
}

func (f *fakeTokens) Create(_ context.Context, r *authnv1.TokenReview, _ metav1.CreateOptions) (*authnv1.TokenReview, error) {
	f.calls++
	if f.calls <= len(f.fail) {
		return nil, f.fail[f.calls-1]
	}
	out := r.DeepCopy()
	if u, ok := f.users[r.Spec.Token]; ok {
		out.Status = authnv1.TokenReviewStatus{Authenticated: true, User: u}
	} else {
		out.Status = authnv1.TokenReviewStatus{Error: "invalid bearer token"}
	}
	return out, nil
}

// fakeAccess allows the users it names to GET /metrics, after failing the
// first len(fail) calls with those errors; it records each review's spec.
type fakeAccess struct {
	readers map[string]bool
	fail    []error
	specs   []authzv1.SubjectAccessReviewSpec
}

func (f *fakeAccess) Create(_ context.Context, r *authzv1.SubjectAccessReview, _ metav1.CreateOptions) (*authzv1.SubjectAccessReview, error) {
	f.specs = append(f.specs, r.Spec)
	if len(f.specs) <= len(f.fail) {
		return nil, f.fail[len(f.specs)-1]
	}
	out := r.DeepCopy()
	a := r.Spec.NonResourceAttributes
	out.Status.Allowed = f.readers[r.Spec.User] && a != nil && a.Verb == "get" && a.Path == "/metrics"
	return out, nil
}

func TestFilter(t *testing.T) {
	scraper := authnv1.UserInfo{Username: "system:serviceaccount:mon:scraper", UID: "u1", Groups: []string{"system:serviceaccounts", "system:authenticated"}, Extra: map[string]authnv1.ExtraValue{"pod": {"p"}}}
	stranger := authnv1.UserInfo{Username: "stranger"}
	users := map[string]authnv1.UserInfo{"scraper-token": scraper, "stranger-token": stranger}
	readers := map[string]bool{scraper.Username: true}
	unavailable := apierrors.NewServiceUnavailable("etcd is down")
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "authentication.k8s.io", Resource: "tokenreviews"}, "", errors.New("no RBAC"))

	type result struct {
		// Codes are the answers to the requests, in order.
		Codes []int
		// TokenReviews and AccessReviews count the calls to the API server.
		TokenReviews, AccessReviews int
	}
	for _, tc := range []struct {
		name       string
		header     string
		method     string
		requests   int
		tokenFail  []error
		accessFail []error
		want       result
	}{
		{name: "no token", requests: 1, want: result{Codes: []int{401}}},
		{name: "not a bearer token", header: "Basic dXNlcjpwYXNz", requests: 1, want: result{Codes: []int{401}}},
		{name: "a token the API server rejects, remembered", header: "Bearer not-a-token", requests: 2, want: result{Codes: []int{401, 401}, TokenReviews: 1}},
		{name: "a reader, remembered", header: "Bearer scraper-token", requests: 3, want: result{Codes: []int{200, 200, 200}, TokenReviews: 1, AccessReviews: 1}},
		{name: "a reader may only read", header: "Bearer scraper-token", method: http.MethodPost, requests: 1, want: result{Codes: []int{403}, TokenReviews: 1, AccessReviews: 1}},
		{name: "not a reader, remembered", header: "bearer  stranger-token ", requests: 2, want: result{Codes: []int{403, 403}, TokenReviews: 1, AccessReviews: 1}},
		{name: "the API server unavailable for a moment", header: "Bearer scraper-token", requests: 1, tokenFail: []error{unavailable, unavailable}, accessFail: []error{unavailable}, want: result{Codes: []int{200}, TokenReviews: 3, AccessReviews: 2}},
		{name: "token reviews refused: not retried, not remembered", header: "Bearer scraper-token", requests: 2, tokenFail: []error{forbidden, forbidden}, want: result{Codes: []int{401, 401}, TokenReviews: 2}},
		{name: "access reviews failing on every try", header: "Bearer scraper-token", requests: 1, accessFail: []error{unavailable, unavailable, unavailable}, want: result{Codes: []int{500}, TokenReviews: 1, AccessReviews: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tokens := &fakeTokens{users: users, fail: tc.tokenFail}
			access := &fakeAccess{readers: readers, fail: tc.accessFail}
			r := newReviews(tokens, access, wait.Backoff{Duration: time.Millisecond, Steps: 3}, Limits())
			h, err := r.filter(logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write([]byte("metrics"))
			}))
			if err != nil {
				t.Fatal(err)
			}
			got := result{}
			for range tc.requests {
				method := tc.method
				if method == "" {
					method = http.MethodGet
				}
				req := httptest.NewRequest(method, "/metrics", nil)
				if tc.header != "" {
					req.Header.Set("Authorization", tc.header)
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				got.Codes = append(got.Codes, w.Code)
			}
			got.TokenReviews, got.AccessReviews = tokens.calls, len(access.specs)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// The access review asks about the token's whole identity and the request.
func TestAccessReviewSpec(t *testing.T) {
	user := authnv1.UserInfo{Username: "u", UID: "1", Groups: []string{"b", "a"}, Extra: map[string]authnv1.ExtraValue{"k": {"v"}}}
	access := &fakeAccess{}
	r := newReviews(&fakeTokens{}, access, reviewBackoff, Limits())
	if _, err := r.authorize(context.Background(), user, "get", "/metrics"); err != nil {
		t.Fatal(err)
	}
	want := []authzv1.SubjectAccessReviewSpec{{
		User: "u", UID: "1", Groups: []string{"b", "a"}, Extra: map[string]authzv1.ExtraValue{"k": {"v"}},
		NonResourceAttributes: &authzv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
	}}
	if diff := cmp.Diff(want, access.specs); diff != "" {
		t.Errorf("SubjectAccessReview specs (-want +got):\n%s", diff)
	}
	// Another group makes another question.
	user.Groups = append(user.Groups, "c")
	if _, err := r.authorize(context.Background(), user, "get", "/metrics"); err != nil {
		t.Fatal(err)
	}
	if len(access.specs) != 2 {
		t.Errorf("%d reviews, want 2: a user with another group was answered from the cache", len(access.specs))
	}
}

// jwt is an unsigned token shaped as a projected service account token:
// its subject, its pod, a serial of its own.
func jwt(sub, podUID string, serial int) string {
	claims, _ := json.Marshal(map[string]any{"sub": sub, "jti": fmt.Sprint(serial),
		"kubernetes.io": map[string]any{"pod": map[string]any{"uid": podUID}}})
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc(claims) + ".sig"
}

// TestFilterFlood: distinct bogus tokens from many addresses cost at most
// the review budget (burst less the reserve, and the rate), not a
// TokenReview each (and its retries); the rest get 503 or 429 with
// Retry-After and cost nothing; a scraper whose projected token was rotated
// during the flood is still served (its new token is a renewal).
func TestFilterFlood(t *testing.T) {
	scraper := authnv1.UserInfo{Username: "system:serviceaccount:mon:prometheus"}
	old, rotated := jwt(scraper.Username, "uid-p", 1), jwt(scraper.Username, "uid-p", 2)
	tokens := &fakeTokens{users: map[string]authnv1.UserInfo{old: scraper, rotated: scraper}}
	access := &fakeAccess{readers: map[string]bool{scraper.Username: true}}
	limits := Limits()
	r := newReviews(tokens, access, reviewBackoff, limits)
	h, err := r.filter(logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("metrics"))
	}))
	if err != nil {
		t.Fatal(err)
	}
	get := func(addr, token string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.RemoteAddr = addr + ":40000"
		req.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	if w := get("10.1.0.1", old); w.Code != 200 {
		t.Fatalf("scraper before the flood: %d", w.Code)
	}
	start := time.Now()
	codes := map[int]int{}
	for i := 0; i < 2000; i++ {
		w := get(fmt.Sprintf("10.2.%d.%d", i/250, i%250/5), fmt.Sprintf("bogus-%d", i))
		codes[w.Code]++
		if (w.Code == 429 || w.Code == 503) && w.Header().Get("Retry-After") == "" {
			t.Fatalf("%d without Retry-After", w.Code)
		}
	}
	elapsed := time.Since(start)
	if w := get("10.1.0.1", rotated); w.Code != 200 {
		t.Errorf("scraper's rotated token during the flood: %d, want 200", w.Code)
	}
	bound := 1 + int(float64(limits.ReviewBurst)*3/4) + int(limits.ReviewQPS*elapsed.Seconds()) + 1 + 1
	t.Logf("2000 bogus tokens from 400 addresses in %v: %d TokenReviews (bound %d), responses %v", elapsed, tokens.calls, bound, codes)
	if tokens.calls > bound {
		t.Errorf("%d TokenReviews, want at most %d (the budget)", tokens.calls, bound)
	}
	if codes[503] == 0 || codes[401] == 0 {
		t.Errorf("responses %v: want 401 (reviewed, rejected) and 503 (the budget spent)", codes)
	}
}
