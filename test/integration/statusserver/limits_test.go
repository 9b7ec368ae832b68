package statusserver

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trainyard/trainyard/pkg/statusserver"
	"github.com/trainyard/trainyard/test/integration/framework"
)

// Flood parameters: clients (each from a loopback address of its own,
// 127.0.0.2 and up: Linux routes all of 127.0.0.0/8 to lo, so the server
// sees distinct TCP peers; it trusts no header such as X-Forwarded-For),
// senders per client, and how long they send.
const (
	floodClients = 16
	floodSenders = 4
	floodFor     = 3 * time.Second
)

// floodResult is what a flood of distinct bogus tokens cost.
type floodResult struct {
	sent                      int64
	codes                     map[int]int64
	reviews, apiserverReviews int64
	elapsed                   time.Duration
}

func (r floodResult) String() string {
	return fmt.Sprintf("%d requests with distinct bogus tokens from %d addresses in %v (%.0f/s): %d TokenReviews (%.1f/s; the API server counted %d), responses %v",
		r.sent, floodClients, r.elapsed.Round(time.Millisecond), float64(r.sent)/r.elapsed.Seconds(),
		r.reviews, float64(r.reviews)/r.elapsed.Seconds(), r.apiserverReviews, r.codes)
}

// flood sends requests with a new bogus token each from floodClients
// addresses, floodSenders at a time per address, for floodFor, while
// during() runs; it counts the TokenReviews with the harness's counting
// client and with the API server's apiserver_request_total.
func (h *harness) flood(t *testing.T, ns, job string, during func()) floodResult {
	t.Helper()
	tlsCfg := h.srv.Client().Transport.(*http.Transport).TLSClientConfig
	before, beforeAPI := h.reviews.Load(), apiserverTokenReviews(t, h)
	var sent atomic.Int64
	var mu sync.Mutex
	codes := map[int]int64{}
	ctx, stop := context.WithTimeout(context.Background(), floodFor)
	defer stop()
	var wg sync.WaitGroup
	begin := time.Now()
	for c := 0; c < floodClients; c++ {
		src := &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+c))}
		hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
			TLSClientConfig: tlsCfg.Clone(), MaxIdleConnsPerHost: floodSenders,
			DialContext: (&net.Dialer{LocalAddr: src}).DialContext}}
		for s := 0; s < floodSenders; s++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					n := sent.Add(1)
					req, _ := http.NewRequest(http.MethodPost, h.srv.URL+statusserver.Path(ns, job), strings.NewReader(upstreamBody))
					req.Header.Set("Authorization", fmt.Sprintf("Bearer bogus-%d-%d", c, n))
					req.Header.Set("X-Forwarded-For", "10.0.0.1") // one client, if the server trusted it
					resp, err := hc.Do(req)
					code := -1
					if err == nil {
						code = resp.StatusCode
						_, _ = io.Copy(io.Discard, resp.Body)
						_ = resp.Body.Close()
						if (code == 429 || code == 503) && resp.Header.Get("Retry-After") == "" {
							t.Errorf("%d without Retry-After", code)
						}
					}
					mu.Lock()
					codes[code]++
					mu.Unlock()
				}
			}()
		}
	}
	during()
	wg.Wait()
	elapsed := time.Since(begin)
	return floodResult{sent: sent.Load(), codes: codes, elapsed: elapsed,
		reviews: h.reviews.Load() - before, apiserverReviews: apiserverTokenReviews(t, h) - beforeAPI}
}

// apiserverTokenReviews is the API server's count of TokenReviews.
func apiserverTokenReviews(t *testing.T, h *harness) int64 {
	t.Helper()
	n, err := framework.APIServerRequests(h.env.Config, "tokenreviews", "")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestTokenReviewFlood (issue #30): a flood of distinct bogus tokens from
// many clients costs at most the review budget (burst + rate × time) of
// TokenReviews, while a trainer keeps reporting — its verdict goes stale
// every second (CacheTTL 1s) and is renewed from the budget's reserve during
// the flood — and its last report lands. With TRAINYARD_MEASURE=1 the same
// flood also runs without limits (the server before issue #30) for
// comparison.
func TestTokenReviewFlood(t *testing.T) {
	limits := statusserver.DefaultLimits()
	limits.CacheTTL = time.Second
	h := startWith(t, 100*time.Millisecond, &limits)
	ns := framework.NewNamespace(t, h.env.Client, "flood")
	h.trainJob(t, ns, "mnist", "none")
	auth := "Bearer " + h.token(t, ns, h.pod(t, ns, "mnist-node-0-0", "mnist"), "mnist")
	body := func(p int) []byte {
		return []byte(fmt.Sprintf(`{"trainerStatus":{"progressPercentage":%d,"lastUpdatedTime":"2026-11-23T10:00:00Z"}}`, p))
	}
	if got := h.post(t, ns, "mnist", auth, body(1)); got.code != 200 {
		t.Fatalf("report before the flood: %d %q", got.code, got.msg)
	}

	var reports []int
	r := h.flood(t, ns, "mnist", func() {
		// The trainer reports every 100ms from 127.0.0.1 during the flood.
		for p := 2; time.Duration(p)*100*time.Millisecond < floodFor; p++ {
			time.Sleep(100 * time.Millisecond)
			reports = append(reports, h.post(t, ns, "mnist", auth, body(p)).code)
		}
	})
	t.Logf("with limits %+v: %v", limits, r)
	bound := int64(limits.ReviewBurst) + int64(limits.ReviewQPS*r.elapsed.Seconds()) + 1
	if r.reviews > bound {
		t.Errorf("%d TokenReviews in %v, want at most %d (burst %d + %v/s)", r.reviews, r.elapsed, bound, limits.ReviewBurst, limits.ReviewQPS)
	}
	if r.apiserverReviews < r.reviews {
		t.Errorf("the API server counted %d TokenReviews, the server sent %d", r.apiserverReviews, r.reviews)
	}
	if r.codes[429] == 0 || r.codes[503] == 0 {
		t.Errorf("responses %v: want both 429 (per address) and 503 (review budget)", r.codes)
	}
	ok := 0
	for _, c := range reports {
		if c == 200 {
			ok++
		}
	}
	t.Logf("trainer during the flood: %d of %d reports accepted (%v)", ok, len(reports), reports)
	if ok != len(reports) || len(reports) == 0 {
		t.Errorf("trainer's reports during the flood: %v, want all 200", reports)
	}
	final := 100
	if got := h.post(t, ns, "mnist", auth, body(final)); got.code != 200 {
		t.Fatalf("report after the flood: %d %q", got.code, got.msg)
	}
	h.co.Wait()
	if st := h.trainerStatus(t, ns, "mnist"); st == nil || st.ProgressPercentage == nil || int(*st.ProgressPercentage) != final {
		t.Errorf("trainerStatus %+v, want the last report (%d%%)", st, final)
	}

	if os.Getenv("TRAINYARD_MEASURE") == "" {
		return
	}
	// The same flood without limits: every request is a TokenReview.
	u := startWith(t, 100*time.Millisecond, nil)
	ns = framework.NewNamespace(t, u.env.Client, "flood")
	u.trainJob(t, ns, "mnist", "none")
	r = u.flood(t, ns, "mnist", func() {})
	t.Logf("without limits: %v", r)
}

// TestRotatedTokensDuringFlood (issue #40): a trainer whose projected token
// is replaced (the kubelet, and the process node, renew one at 80% of its
// life) keeps reporting through a flood that holds the review budget at its
// reserve: the new token, never seen, is a renewal of the pod's identity
// (reviewlimit: the token's service account and pod). The flood here is not
// slowed by the per-address limit (as from hundreds of pods) and the budget
// is small (4 reviews/s, burst 16, reserve 4), so that this machine's flood
// keeps it at its reserve; the token is replaced before every fifth report
// (each new one a first review, 2/s: within the budget). Before, each such
// review waited for the budget like a stranger's and got 503.
func TestRotatedTokensDuringFlood(t *testing.T) {
	limits := statusserver.DefaultLimits()
	limits.ClientQPS = 0 // the flood comes from more addresses than any per-address limit bounds
	limits.ReviewQPS, limits.ReviewBurst = 4, 16
	h := startWith(t, 100*time.Millisecond, &limits)
	ns := framework.NewNamespace(t, h.env.Client, "rotate")
	h.trainJob(t, ns, "mnist", "none")
	pod := h.pod(t, ns, "mnist-node-0-0", "mnist")
	auth := "Bearer " + h.token(t, ns, pod, "mnist")
	body := func(p int) []byte {
		return []byte(fmt.Sprintf(`{"trainerStatus":{"progressPercentage":%d,"lastUpdatedTime":"2026-11-23T10:00:00Z"}}`, p))
	}
	if got := h.post(t, ns, "mnist", auth, body(1)); got.code != 200 {
		t.Fatalf("report before the flood: %d %q", got.code, got.msg)
	}
	var reports []int
	rotations := 0
	r := h.flood(t, ns, "mnist", func() {
		time.Sleep(500 * time.Millisecond) // the flood has spent the budget down to its reserve
		for p := 2; time.Duration(p)*100*time.Millisecond < floodFor; p++ {
			time.Sleep(100 * time.Millisecond)
			if p%5 == 0 {
				auth = "Bearer " + h.token(t, ns, pod, "mnist")
				rotations++
			}
			reports = append(reports, h.post(t, ns, "mnist", auth, body(p)).code)
		}
	})
	t.Logf("with limits %+v: %v", limits, r)
	ok := 0
	for _, c := range reports {
		if c == 200 {
			ok++
		}
	}
	t.Logf("trainer during the flood, its token replaced %d times: %d of %d reports accepted (%v)", rotations, ok, len(reports), reports)
	if ok != len(reports) || len(reports) == 0 {
		t.Errorf("trainer's reports across token rotations during the flood: %v, want all 200", reports)
	}
	if r.codes[503] == 0 {
		t.Errorf("responses %v: the flood did not spend the review budget", r.codes)
	}
	bound := int64(limits.ReviewBurst) + int64(limits.ReviewQPS*r.elapsed.Seconds()) + 1
	if r.reviews > bound {
		t.Errorf("%d TokenReviews in %v, want at most %d", r.reviews, r.elapsed, bound)
	}
}
