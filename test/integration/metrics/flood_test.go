package metrics

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trainyard/trainyard/pkg/metrics/serving"
	"github.com/trainyard/trainyard/pkg/reviewlimit"
	"github.com/trainyard/trainyard/test/integration/framework"
)

// Flood parameters, as the status server's flood (test/integration/statusserver):
// clients each from a loopback address of its own (127.0.0.2 and up), senders
// per client, and how long they send.
const (
	floodClients = 16
	floodSenders = 4
	floodFor     = 3 * time.Second
)

// apiserverTokenReviews is the API server's count of TokenReviews.
func apiserverTokenReviews(t *testing.T, f *fixture) int64 {
	t.Helper()
	n, err := framework.APIServerRequests(f.env.Config, "tokenreviews", "")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// floodResult is what a flood of distinct bogus tokens cost.
type floodResult struct {
	sent    int64
	codes   map[int]int64
	reviews int64
	elapsed time.Duration
}

func (r floodResult) String() string {
	return fmt.Sprintf("%d scrapes with distinct bogus tokens from %d addresses in %v (%.0f/s): %d TokenReviews (%.1f/s), responses %v",
		r.sent, floodClients, r.elapsed.Round(time.Millisecond), float64(r.sent)/r.elapsed.Seconds(),
		r.reviews, float64(r.reviews)/r.elapsed.Seconds(), r.codes)
}

// flood scrapes with a new bogus token each from floodClients addresses,
// floodSenders at a time per address, for floodFor, while during runs; it
// counts the TokenReviews the API server served meanwhile (the scraper's
// included).
func (f *fixture) flood(t *testing.T, during func()) floodResult {
	t.Helper()
	before := apiserverTokenReviews(t, f)
	var sent atomic.Int64
	var mu sync.Mutex
	codes := map[int]int64{}
	ctx, stop := context.WithTimeout(context.Background(), floodFor)
	defer stop()
	var wg sync.WaitGroup
	begin := time.Now()
	for c := range floodClients {
		src := &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+c))}
		hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, MaxIdleConnsPerHost: floodSenders, //nolint:gosec // self-signed, as in TestSecureMetrics
			DialContext: (&net.Dialer{LocalAddr: src}).DialContext}}
		for range floodSenders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					n := sent.Add(1)
					req, _ := http.NewRequest(http.MethodGet, "https://"+f.addr+"/metrics", nil)
					req.Header.Set("Authorization", fmt.Sprintf("Bearer bogus-%d-%d", c, n))
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
	return floodResult{sent: sent.Load(), codes: codes, elapsed: elapsed, reviews: apiserverTokenReviews(t, f) - before}
}

// TestMetricsFlood (issue #40): each distinct bearer token on the metrics
// port costs a TokenReview; a flood of them from many addresses costs at
// most the review budget (burst + rate × time; the status server's
// protection, pkg/reviewlimit), while Prometheus — a ServiceAccount bound to
// trainyard-metrics-reader, scraping every 100ms — keeps getting 200, across
// a new token halfway (its projected token rotated). With TRAINYARD_MEASURE=1
// the same flood also runs without limits (the endpoint before issue #40).
func TestMetricsFlood(t *testing.T) {
	f := startMetricsWith(t, nil, false)
	limits := serving.Limits()
	token := f.tokens["scraper"]
	if code, _, err := f.scrape("https", token); err != nil || code != 200 {
		t.Fatalf("scrape before the flood: %d, %v", code, err)
	}
	var codes []int
	rotated := 0
	r := f.flood(t, func() {
		for i := 1; time.Duration(i)*100*time.Millisecond < floodFor; i++ {
			time.Sleep(100 * time.Millisecond)
			if time.Duration(i)*100*time.Millisecond >= floodFor/2 && rotated == 0 {
				token, rotated = f.token(t, "scraper"), i
			}
			code, _, err := f.scrape("https", token)
			if err != nil {
				t.Errorf("scrape %d: %v", i, err)
			}
			codes = append(codes, code)
		}
	})
	t.Logf("with the limits %+v: %v", limits, r)
	ok := 0
	for _, c := range codes {
		if c == 200 {
			ok++
		}
	}
	t.Logf("Prometheus during the flood: %d of %d scrapes 200, its token replaced before scrape %d (%v)", ok, len(codes), rotated, codes)
	if ok != len(codes) || len(codes) == 0 {
		t.Errorf("scrapes during the flood: %v, want all 200", codes)
	}
	// The scraper's rotated token is one review too.
	bound := int64(limits.ReviewBurst) + int64(limits.ReviewQPS*r.elapsed.Seconds()) + 2
	if r.reviews > bound {
		t.Errorf("%d TokenReviews in %v, want at most %d (burst %d + %v/s)", r.reviews, r.elapsed, bound, limits.ReviewBurst, limits.ReviewQPS)
	}
	if r.codes[429] == 0 && r.codes[503] == 0 {
		t.Errorf("responses %v: want 429 (per address) or 503 (review budget)", r.codes)
	}

	if os.Getenv("TRAINYARD_MEASURE") == "" {
		return
	}
	u := startMetricsWith(t, &reviewlimit.Limits{}, false)
	r = u.flood(t, func() {})
	t.Logf("without limits: %v", r)
}
