package reviewlimit

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is a settable clock.
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

// jwt is an unsigned token shaped as the API server issues projected
// service account tokens: subject, bound pod, a serial of its own.
func jwt(sub, podUID string, serial int) string {
	claims, _ := json.Marshal(map[string]any{
		"sub": sub, "jti": fmt.Sprint(serial),
		"kubernetes.io": map[string]any{"pod": map[string]any{"name": "mnist-0", "uid": podUID}},
	})
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc(claims) + ".sig"
}

// reviewer passes the tokens in good and counts its reviews.
type reviewer struct {
	good map[string]bool
	n    atomic.Int64
}

func (r *reviewer) review(token string) func(context.Context) (string, error) {
	return func(context.Context) (string, error) {
		r.n.Add(1)
		if r.good[token] {
			return "user-of-" + token[len(token)-6:], nil
		}
		return "", fmt.Errorf("%w: not authenticated", ErrDenied)
	}
}

// TestGuardRenewedToken: a new token of an identity that passed (the
// kubelet rotated a pod's projected token) is reviewed from the reserve
// while a flood of bogus tokens has spent the rest of the budget; a token
// claiming the identity that fails spends its priority after
// maxIdentityFailures tries.
func TestGuardRenewedToken(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	old, rotated := jwt("system:serviceaccount:ns:trainer", "uid-0", 1), jwt("system:serviceaccount:ns:trainer", "uid-0", 2)
	stranger := jwt("system:serviceaccount:ns:other", "uid-9", 1)
	r := &reviewer{good: map[string]bool{old: true, rotated: true, stranger: true}}
	g := NewGuard[string](0, time.Minute, 10*time.Second, NewBudget(10, 8), clock) // reserve 2
	ctx := context.Background()
	if _, err := g.Check(ctx, "10.0.0.1", "aud", old, nil, r.review(old)); err != nil {
		t.Fatalf("the first token: %v", err)
	}
	flood := func() {
		for i := 0; i < 100; i++ {
			tok := fmt.Sprintf("bogus-%d", i)
			_, _ = g.Check(ctx, "10.0.0.9", "aud", tok, nil, r.review(tok))
		}
	}
	flood()
	if n := r.n.Load(); n != 6 {
		t.Fatalf("%d reviews, want 6: the first token and 5 bogus ones (burst 8 less the reserve of 2)", n)
	}
	// A stranger's valid token waits for the budget, as any token never seen.
	var th *Throttled
	if _, err := g.Check(ctx, "10.0.0.2", "aud", stranger, nil, r.review(stranger)); !errors.As(err, &th) || !th.Budget {
		t.Errorf("a new identity's token during the flood: %v, want throttled by the budget", err)
	}
	// The rotated token of the identity that passed takes the reserve.
	if user, err := g.Check(ctx, "10.0.0.1", "aud", rotated, nil, r.review(rotated)); err != nil || user == "" {
		t.Errorf("the rotated token during the flood: %q, %v; want it reviewed and passed", user, err)
	}
	// The same identity in another scope (another TrainJob's audience) is unknown there.
	if _, err := g.Check(ctx, "10.0.0.1", "other-aud", rotated, nil, r.review(rotated)); !errors.As(err, &th) {
		t.Errorf("the rotated token for another audience: %v, want throttled", err)
	}

	// Forged tokens that claim the identity: two may take from the
	// reserve, then the identity has no priority until a token of it passes.
	reviews := r.n.Load()
	for i := 0; i < 4; i++ {
		clock.step(time.Second) // the budget refills to its burst
		flood()                 // and the flood takes it back down to the reserve
		forged := jwt("system:serviceaccount:ns:trainer", "uid-0", 100+i)
		_, err := g.Check(ctx, "10.0.0.1", "aud", forged, nil, r.review(forged))
		switch {
		case i < maxIdentityFailures && !errors.Is(err, ErrDenied):
			t.Errorf("forged token %d: %v, want reviewed and denied", i, err)
		case i >= maxIdentityFailures && !errors.As(err, &th):
			t.Errorf("forged token %d: %v, want throttled (the identity lost its priority)", i, err)
		}
	}
	// Each second refills the budget to its burst: the flood takes 6, down
	// to the reserve, and only the forged tokens with priority take more.
	if got := r.n.Load() - reviews; got != 4*6+maxIdentityFailures {
		t.Errorf("%d reviews in 4 s of flood with forged tokens, want %d (6 a second and %d forged)", got, 4*6+maxIdentityFailures, maxIdentityFailures)
	}
}

// TestGuardCache: bounded, positive and negative TTLs, a flood of bogus
// tokens does not evict a verdict that passed, no token is kept raw, what
// the review found is served from the cache.
func TestGuardCache(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	r := &reviewer{good: map[string]bool{"good-token": true}}
	g := NewGuard[string](4, time.Minute, 10*time.Second, nil, clock)
	ctx := context.Background()
	check := func(tok string) (string, error) { return g.Check(ctx, "10.0.0.1", "aud", tok, nil, r.review(tok)) }
	if user, err := check("good-token"); err != nil || user != "user-of--token" {
		t.Fatalf("good token: %q, %v", user, err)
	}
	for i := 0; i < 100; i++ {
		if _, err := check(fmt.Sprintf("bogus-%d", i)); !errors.Is(err, ErrDenied) {
			t.Fatalf("bogus token: %v, want denied", err)
		}
	}
	if pos, neg := g.Cache().Len(); pos != 1 || neg != 4 {
		t.Errorf("cache holds %d positive and %d negative verdicts, want 1 and 4 (the size)", pos, neg)
	}
	if user, err := check("good-token"); err != nil || user != "user-of--token" || r.n.Load() != 101 {
		t.Errorf("good token again: %q, %v after %d reviews; want it from the cache (101 reviews)", user, err, r.n.Load())
	}
	clock.step(61 * time.Second)
	if _, st := g.Lookup("aud", "good-token"); st != Stale {
		t.Errorf("good token after its TTL: %v, want stale", st)
	}
	clock.step(time.Minute)
	if _, st := g.Lookup("aud", "good-token"); st != Unknown {
		t.Errorf("good token after twice its TTL: %v, want unknown", st)
	}
}

// TestGuardSharesReviews: concurrent requests with one token cost one review.
func TestGuardSharesReviews(t *testing.T) {
	g := NewGuard[string](0, 0, 0, nil, nil)
	gate := make(chan struct{})
	var n atomic.Int64
	review := func(context.Context) (string, error) {
		n.Add(1)
		<-gate
		return "", ErrDenied
	}
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := g.Check(context.Background(), "10.0.0.1", "aud", "tok", nil, review); !errors.Is(err, ErrDenied) {
				t.Errorf("Check = %v, want denied", err)
			}
		}()
	}
	for n.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // the others queue behind the first
	close(gate)
	wg.Wait()
	if n.Load() != 1 {
		t.Errorf("%d reviews for 20 concurrent requests with one token, want 1", n.Load())
	}
}

func TestIdentityOf(t *testing.T) {
	for _, tc := range []struct {
		token string
		want  string
		ok    bool
	}{
		{jwt("system:serviceaccount:ns:sa", "uid-1", 1), "system:serviceaccount:ns:sa\x00uid-1", true},
		{jwt("system:serviceaccount:ns:sa", "", 1), "system:serviceaccount:ns:sa\x00", true},
		{jwt("", "uid-1", 1), "", false},
		{"not-a-jwt", "", false},
		{"a.!!!.c", "", false},
		{"a." + base64.RawURLEncoding.EncodeToString([]byte("[1]")) + ".c", "", false},
	} {
		if got, ok := identityOf(tc.token); got != tc.want || ok != tc.ok {
			t.Errorf("identityOf(%q) = %q, %v; want %q, %v", tc.token, got, ok, tc.want, tc.ok)
		}
	}
}
