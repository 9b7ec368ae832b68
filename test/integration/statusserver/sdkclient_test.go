package statusserver

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/statusserver"
	"github.com/trainyard/trainyard/test/integration/framework"
)

// sdkStatusClient is Trainyard's own client that sends exactly what the
// Kubeflow SDK 0.5's in-pod helper update_trainjob_status sends (its Python
// is not installable here; this is a protocol stand-in): the URL, token file
// and CA file from KUBEFLOW_TRAINER_SERVER_URL, _TOKEN and _CA_CERT; the
// token cached for 300 s; at most one update per 5 s (a call within 5 s of
// the last update that succeeded is dropped, not queued); progress clamped to
// 0..100 and the ETA to >= 0; at most 256 metrics, values as Python's str();
// lastUpdatedTime as Python's datetime.now(timezone.utc).isoformat()
// (microseconds and +00:00); the body as requests' json= serialises it
// (json.dumps: ", " and ": " separators, keys in insertion order); the
// headers requests sends; a 5 s timeout; only 200 counts as sent.
type sdkStatusClient struct {
	getenv func(string) string
	now    func() time.Time // the wall clock of lastUpdatedTime
	mono   func() time.Time // the monotonic clock of the throttle and token cache

	mu          sync.Mutex
	lastUpdate  time.Time
	token       string
	tokenReadAt time.Time
	// sent counts the requests that left the client.
	sent int
}

const (
	sdkMinUpdateInterval = 5 * time.Second
	sdkTokenCacheTTL     = 300 * time.Second
	sdkMaxMetrics        = 256
)

// metric is one entry of the metrics dict, in the caller's order (a Python
// dict keeps insertion order).
type metric struct {
	name  string
	value any // float64, int or string, as the SDK accepts
}

// update is update_trainjob_status: true when the server answered 200.
func (c *sdkStatusClient) update(progress, eta *int, metrics []metric) bool {
	url := c.getenv("KUBEFLOW_TRAINER_SERVER_URL")
	if url == "" {
		return false
	}
	c.mu.Lock()
	throttled := !c.lastUpdate.IsZero() && c.mono().Sub(c.lastUpdate) < sdkMinUpdateInterval
	c.mu.Unlock()
	if throttled {
		return false
	}
	token := c.cachedToken(c.getenv("KUBEFLOW_TRAINER_SERVER_TOKEN"))
	if token == "" {
		return false
	}
	var body strings.Builder
	body.WriteString(`{"trainerStatus": {"lastUpdatedTime": ` + pyStr(pyISOFormat(c.now())))
	if progress != nil {
		body.WriteString(`, "progressPercentage": ` + strconv.Itoa(max(0, min(100, *progress))))
	}
	if eta != nil {
		body.WriteString(`, "estimatedRemainingSeconds": ` + strconv.Itoa(max(0, *eta)))
	}
	if len(metrics) > 0 {
		if len(metrics) > sdkMaxMetrics {
			metrics = metrics[:sdkMaxMetrics]
		}
		body.WriteString(`, "metrics": [`)
		for i, m := range metrics {
			if i > 0 {
				body.WriteString(", ")
			}
			body.WriteString(`{"name": ` + pyStr(m.name) + `, "value": ` + pyStr(pyStrOf(m.value)) + `}`)
		}
		body.WriteString("]")
	}
	body.WriteString("}}")

	tr := &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12}}
	if ca := c.getenv("KUBEFLOW_TRAINER_SERVER_CA_CERT"); ca != "" {
		if pem, err := os.ReadFile(ca); err == nil { // verify=ca_file when it exists, else the system's roots
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM(pem)
			tr.TLSClientConfig.RootCAs = pool
		}
	}
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body.String()))
	if err != nil {
		return false
	}
	req.Header.Set("User-Agent", "python-requests/2.32.3")
	req.Header.Set("Accept-Encoding", "gzip, deflate")
	req.Header.Set("Accept", "*/*")
	req.Header.Set("Connection", "keep-alive")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	c.mu.Lock()
	c.sent++
	c.mu.Unlock()
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return false
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return false
	}
	c.mu.Lock()
	c.lastUpdate = c.mono()
	c.mu.Unlock()
	return true
}

func (c *sdkStatusClient) cachedToken(path string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token != "" && c.mono().Sub(c.tokenReadAt) < sdkTokenCacheTTL {
		return c.token
	}
	b, err := os.ReadFile(path)
	if path == "" || err != nil {
		return ""
	}
	c.token, c.tokenReadAt = strings.TrimSpace(string(b)), c.mono()
	return c.token
}

// pyISOFormat is datetime.isoformat() of an aware UTC datetime.
func pyISOFormat(t time.Time) string {
	t = t.UTC()
	if t.Nanosecond()/1000 == 0 {
		return t.Format("2006-01-02T15:04:05") + "+00:00"
	}
	return t.Format("2006-01-02T15:04:05.000000") + "+00:00"
}

// pyStrOf is Python's str() of a metric value.
func pyStrOf(v any) string {
	switch x := v.(type) {
	case float64:
		s := strconv.FormatFloat(x, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eEn") {
			s += ".0"
		}
		return s
	case int:
		return strconv.Itoa(x)
	case bool:
		if x {
			return "True"
		}
		return "False"
	}
	return fmt.Sprint(v)
}

// pyStr is json.dumps of a string (ensure_ascii).
func pyStr(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	out := strings.TrimSuffix(b.String(), "\n")
	var ascii strings.Builder
	for _, r := range out {
		if r > 0x7e {
			fmt.Fprintf(&ascii, `\u%04x`, r)
			continue
		}
		ascii.WriteRune(r)
	}
	return ascii.String()
}

// The SDK's helper, as a trainer calls it from its pod, against the status
// server with a real pod-bound token and the server's CA: the report lands in
// status.trainerStatus as sent; a second call within 5 s is dropped by the
// client without a request; after 5 s the next is sent; 300 metrics are cut
// to 256, which the server takes. The body is byte for byte the SDK's.
func TestSDKStatusHelper(t *testing.T) {
	h := start(t, 10*time.Millisecond)
	ns := framework.NewNamespace(t, h.env.Client, "sdk")
	h.trainJob(t, ns, "mnist", "none")
	pod := h.pod(t, ns, "mnist-node-0-0", "mnist")

	// The files the pod's projected volume holds, and its env.
	dir := t.TempDir()
	tokenFile, caFile := filepath.Join(dir, "token"), filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(tokenFile, []byte(h.token(t, ns, pod, "mnist")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: h.srv.Certificate().Raw})
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"KUBEFLOW_TRAINER_SERVER_URL":     h.srv.URL + statusserver.Path(ns, "mnist"),
		"KUBEFLOW_TRAINER_SERVER_TOKEN":   tokenFile,
		"KUBEFLOW_TRAINER_SERVER_CA_CERT": caFile,
	}
	wall := time.Date(2026, 11, 28, 7, 30, 15, 123456000, time.UTC)
	mono := time.Unix(1000, 0)
	c := &sdkStatusClient{getenv: func(k string) string { return env[k] }, now: func() time.Time { return wall }, mono: func() time.Time { return mono }}

	if !c.update(ptr.To(42), ptr.To(120), []metric{{"loss", 0.123}, {"accuracy", 0.95}, {"epoch", 3}}) {
		t.Fatal("update_trainjob_status returned False")
	}
	h.co.Wait()
	want := &trainer.TrainerStatus{
		ProgressPercentage: ptr.To[int32](42), EstimatedRemainingSeconds: ptr.To[int32](120),
		Metrics:         []trainer.Metric{{Name: "loss", Value: "0.123"}, {Name: "accuracy", Value: "0.95"}, {Name: "epoch", Value: "3"}},
		LastUpdatedTime: metav1.NewTime(wall.Truncate(time.Second)),
	}
	if diff := cmp.Diff(want, h.trainerStatus(t, ns, "mnist"), cmpTime); diff != "" {
		t.Errorf("trainerStatus (-want +got):\n%s", diff)
	}

	// Within 5 s: dropped by the client, nothing sent.
	mono = mono.Add(4 * time.Second)
	if c.update(ptr.To(50), nil, nil) || c.sent != 1 {
		t.Errorf("a call 4 s after an update: sent (%d requests in all), want it dropped", c.sent)
	}
	// After 5 s: sent; progress clamped; 300 metrics cut to 256.
	mono, wall = mono.Add(time.Second), wall.Add(5*time.Second)
	var many []metric
	for i := range 300 {
		many = append(many, metric{fmt.Sprintf("m%03d", i), i})
	}
	if !c.update(ptr.To(150), ptr.To(-3), many) {
		t.Fatal("the call 5 s after the last update returned False")
	}
	h.co.Wait()
	got := h.trainerStatus(t, ns, "mnist")
	if ptr.Deref(got.ProgressPercentage, -1) != 100 || ptr.Deref(got.EstimatedRemainingSeconds, -1) != 0 || len(got.Metrics) != 256 {
		t.Errorf("trainerStatus: progress %v, ETA %v, %d metrics; want 100, 0 and 256", got.ProgressPercentage, got.EstimatedRemainingSeconds, len(got.Metrics))
	}
}

// The body is what requests sends for json={"trainerStatus": ...}.
func TestSDKStatusBody(t *testing.T) {
	var body []byte
	var header http.Header
	srv := newRecorder(t, &body, &header)
	c := &sdkStatusClient{
		getenv: func(k string) string {
			return map[string]string{"KUBEFLOW_TRAINER_SERVER_URL": srv.URL, "KUBEFLOW_TRAINER_SERVER_TOKEN": writeTemp(t, "tok\n")}[k]
		},
		now:  func() time.Time { return time.Date(2026, 11, 28, 7, 30, 15, 0, time.UTC) },
		mono: time.Now,
	}
	c.update(ptr.To(7), nil, []metric{{"loss", 1.0}, {"note", "é"}})
	want := `{"trainerStatus": {"lastUpdatedTime": "2026-11-28T07:30:15+00:00", "progressPercentage": 7, ` +
		`"metrics": [{"name": "loss", "value": "1.0"}, {"name": "note", "value": "\u00e9"}]}}`
	if diff := cmp.Diff(want, string(body)); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
	if header.Get("Authorization") != "Bearer tok" || header.Get("Content-Type") != "application/json" {
		t.Errorf("headers %v", header)
	}
}

// newRecorder is a plain HTTP server that keeps the last request's body and
// headers and answers 200.
func newRecorder(t *testing.T, body *[]byte, header *http.Header) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		*body, _ = io.ReadAll(r.Body)
		*header = r.Header.Clone()
	}))
	t.Cleanup(srv.Close)
	return srv
}

func writeTemp(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
