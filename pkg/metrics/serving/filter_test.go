package serving

import (
	"context"
	"errors"
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
			r := newReviews(tokens, access, wait.Backoff{Duration: time.Millisecond, Steps: 3})
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
	r := newReviews(&fakeTokens{}, access, reviewBackoff)
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
