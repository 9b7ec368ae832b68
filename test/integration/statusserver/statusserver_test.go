// Package statusserver checks the runtime status server against a real
// kube-apiserver: real pod-bound service account tokens (TokenRequest), real
// TokenReviews, and server-side apply of status.trainerStatus; and that the
// TrainJob reconciler keeps what the server wrote.
package statusserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	authnclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/statusserver"
	"github.com/trainyard/trainyard/test/integration/framework"
	"github.com/trainyard/trainyard/test/prereq"
)

// harness is a status server in front of the test API server, as
// statusserver.Setup wires it in the manager (TLS from httptest instead of
// the webhook certificate).
type harness struct {
	env    *framework.Env
	cs     *kubernetes.Clientset
	srv    *httptest.Server
	co     *statusserver.Coalescer
	writes atomic.Int64
	// reviews counts the TokenReviews the server sends.
	reviews atomic.Int64
}

func start(t *testing.T, interval time.Duration) *harness {
	t.Helper()
	return startWith(t, interval, nil)
}

// countingReviews counts the TokenReviews that reach the API server.
type countingReviews struct {
	authnclient.TokenReviewInterface
	n *atomic.Int64
}

func (c countingReviews) Create(ctx context.Context, tr *authenticationv1.TokenReview, o metav1.CreateOptions) (*authenticationv1.TokenReview, error) {
	c.n.Add(1)
	return c.TokenReviewInterface.Create(ctx, tr, o)
}

// startWith starts the harness with limits (nil: none, as before issue #30).
func startWith(t *testing.T, interval time.Duration, limits *statusserver.Limits) *harness {
	t.Helper()
	env, err := framework.Start()
	if err != nil {
		t.Fatalf("starting the API server: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping: %v", err)
		}
	})
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{env: env, cs: cs}
	write := statusserver.ApplyWriter(env.Client)
	h.co = &statusserver.Coalescer{Interval: interval, Write: func(ctx context.Context, key types.NamespacedName, st *trainer.TrainerStatus) error {
		h.writes.Add(1)
		return write(ctx, key, st)
	}, OnError: func(key types.NamespacedName, err error) { t.Errorf("write of %s: %v", key, err) }}
	reviews := countingReviews{TokenReviewInterface: cs.AuthenticationV1().TokenReviews(), n: &h.reviews}
	handler := &statusserver.Handler{
		Auth:      &statusserver.Authorizer{Reviews: reviews, Pods: env.Client, CacheTTL: time.Minute},
		Jobs:      env.Client,
		Coalescer: h.co,
	}
	if limits != nil {
		handler.Auth = statusserver.NewAuthorizer(*limits, reviews, env.Client)
		handler.Limits = limits.ClientLimits()
	}
	h.srv = httptest.NewTLSServer(handler.ServeMux())
	h.srv.Client().Transport.(*http.Transport).MaxIdleConnsPerHost = 64 // keep-alive for concurrent trainers
	t.Cleanup(h.srv.Close)
	return h
}

// trainJob creates a TrainJob of a runtime that does not exist (yet).
func (h *harness) trainJob(t *testing.T, ns, name, runtime string) {
	t.Helper()
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: runtime}}}
	if err := h.env.Client.Create(context.Background(), tj); err != nil {
		t.Fatal(err)
	}
}

// pod creates a pod of TrainJob job's JobSet (or of none, job "") and returns it.
func (h *harness) pod(t *testing.T, ns, name, job string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	if err := h.env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "trainer"}, &corev1.ServiceAccount{}); err != nil {
		if err := h.env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "trainer", Namespace: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{ServiceAccountName: "trainer", AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "node", Image: "python"}}}}
	if job != "" {
		p.Labels = map[string]string{"jobset.sigs.k8s.io/jobset-name": job}
	}
	if err := h.env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// token asks for a token as the kubelet does for a projected volume: bound
// to the pod, with the audience of TrainJob audJob. pod nil: not bound.
func (h *harness) token(t *testing.T, ns string, pod *corev1.Pod, audJob string) string {
	t.Helper()
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences: []string{statusserver.Audience(ns, audJob)}, ExpirationSeconds: ptr.To[int64](3600)}}
	if pod != nil {
		tr.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
	}
	out, err := h.cs.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), "trainer", tr, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest: %v", err)
	}
	return out.Status.Token
}

type response struct {
	code int
	msg  string
}

// post sends body to TrainJob ns/job's URL with header Authorization: auth ("" none).
func (h *harness) post(t *testing.T, ns, job, auth string, body []byte) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.srv.URL+statusserver.Path(ns, job), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	var st metav1.Status
	_ = json.Unmarshal(b, &st)
	return response{code: resp.StatusCode, msg: st.Message}
}

func (h *harness) trainerStatus(t *testing.T, ns, name string) *trainer.TrainerStatus {
	t.Helper()
	var tj trainer.TrainJob
	if err := h.env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &tj); err != nil {
		t.Fatal(err)
	}
	return tj.Status.TrainerStatus
}

const upstreamBody = `{"trainerStatus":{"progressPercentage":42,"estimatedRemainingSeconds":120,` +
	`"metrics":[{"name":"loss","value":"0.123"},{"name":"accuracy","value":"0.95"}],"lastUpdatedTime":"2026-11-23T10:00:00Z"}}`

func TestStatusServer(t *testing.T) {
	h := start(t, 100*time.Millisecond)
	c := h.env.Client
	ns := framework.NewNamespace(t, c, "status")
	h.trainJob(t, ns, "mnist", "status-plain-ml")
	h.trainJob(t, ns, "other", "status-plain-ml")
	mine, theirs, loose := h.pod(t, ns, "mnist-node-0-0", "mnist"), h.pod(t, ns, "other-node-0-0", "other"), h.pod(t, ns, "loose", "")
	good := "Bearer " + h.token(t, ns, mine, "mnist")
	ghostPod := h.pod(t, ns, "ghost-node-0-0", "ghost")

	cases := []struct {
		name     string
		job      string
		auth     string
		body     string
		wantCode int
		wantMsg  string
	}{
		{"no token", "mnist", "", upstreamBody, 401, "bearer token"},
		{"not a bearer token", "mnist", "Basic dXNlcjpwYXNz", upstreamBody, 401, "bearer token"},
		{"garbage token", "mnist", "Bearer not-a-jwt", upstreamBody, 403, "not valid for audience"},
		{"token for another TrainJob", "mnist", "Bearer " + h.token(t, ns, mine, "other"), upstreamBody, 403, "not valid for audience"},
		{"pod of another TrainJob", "mnist", "Bearer " + h.token(t, ns, theirs, "mnist"), upstreamBody, 403, "does not belong to TrainJob mnist"},
		{"pod of no TrainJob", "mnist", "Bearer " + h.token(t, ns, loose, "mnist"), upstreamBody, 403, "does not belong to TrainJob mnist"},
		{"token bound to no pod", "mnist", "Bearer " + h.token(t, ns, nil, "mnist"), upstreamBody, 403, "not bound to a pod"},
		{"malformed JSON", "mnist", good, `{"trainerStatus":{"progressPercentage":4`, 400, "malformed JSON"},
		{"percentage out of range", "mnist", good, `{"trainerStatus":{"progressPercentage":101}}`, 400, "progressPercentage: 101 is not between 0 and 100"},
		{"unknown field", "mnist", good, `{"trainerStatus":{"progress":42}}`, 400, `unknown field "progress"`},
		{"oversized body", "mnist", good, `{"trainerStatus":{}}` + strings.Repeat(" ", 70000), 400, "body larger than 65536 bytes"},
		{"TrainJob that does not exist", "ghost", "Bearer " + h.token(t, ns, ghostPod, "ghost"), upstreamBody, 404, "Train job not found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := h.post(t, ns, tc.job, tc.auth, []byte(tc.body))
			if got.code != tc.wantCode || !strings.Contains(got.msg, tc.wantMsg) {
				t.Errorf("POST = %d %q, want %d with %q", got.code, got.msg, tc.wantCode, tc.wantMsg)
			}
		})
	}
	h.co.Wait()
	if n := h.writes.Load(); n != 0 {
		t.Errorf("%d writes after only rejected reports, want none", n)
	}
	for _, job := range []string{"mnist", "other"} {
		if st := h.trainerStatus(t, ns, job); st != nil {
			t.Errorf("TrainJob %s: trainerStatus %+v after only rejected reports, want none", job, st)
		}
	}

	// The upstream script's report lands exactly, owned by trainer-status.
	if got := h.post(t, ns, "mnist", good, []byte(upstreamBody)); got.code != 200 {
		t.Fatalf("POST = %d %q, want 200", got.code, got.msg)
	}
	h.co.Wait()
	want := &trainer.TrainerStatus{
		ProgressPercentage: ptr.To[int32](42), EstimatedRemainingSeconds: ptr.To[int32](120),
		Metrics:         []trainer.Metric{{Name: "loss", Value: "0.123"}, {Name: "accuracy", Value: "0.95"}},
		LastUpdatedTime: metav1.NewTime(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)),
	}
	if diff := cmp.Diff(want, h.trainerStatus(t, ns, "mnist"), cmpTime); diff != "" {
		t.Errorf("trainerStatus (-want +got):\n%s", diff)
	}
	var tj trainer.TrainJob
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "mnist"}, &tj); err != nil {
		t.Fatal(err)
	}
	if owners := statusOwners(tj.ManagedFields, "trainerStatus"); !cmp.Equal(owners, []string{statusserver.FieldManager}) {
		t.Errorf("managers of status.trainerStatus = %v, want [%s]", owners, statusserver.FieldManager)
	}

	// The reconciler's status writes keep it: the manager runs, the runtime
	// appears, the TrainJob gets its JobSet and a new status.
	if err := h.env.StartManager(framework.ManagerOptions{}); err != nil {
		t.Fatal(err)
	}
	createRuntime(t, c, "status-plain-ml")
	framework.Eventually(t, func() error {
		var tj trainer.TrainJob
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "mnist"}, &tj); err != nil {
			return err
		}
		if tj.Status.Phase == "" || meta.IsStatusConditionFalse(tj.Status.Conditions, trainer.TrainJobCreated) {
			return fmt.Errorf("the reconciler has not written the status of a running TrainJob yet: %+v", tj.Status)
		}
		return nil
	})
	if diff := cmp.Diff(want, h.trainerStatus(t, ns, "mnist"), cmpTime); diff != "" {
		t.Errorf("trainerStatus after the reconciler wrote status (-want +got):\n%s", diff)
	}

	// A later report replaces the earlier one (metrics is atomic, absent
	// fields go): last write wins.
	later := `{"trainerStatus":{"progressPercentage":100,"metrics":[{"name":"loss","value":"0.01"}],"lastUpdatedTime":"2026-11-23T10:05:00Z"}}`
	if got := h.post(t, ns, "mnist", good, []byte(later)); got.code != 200 {
		t.Fatalf("POST = %d %q, want 200", got.code, got.msg)
	}
	h.co.Wait()
	want = &trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](100), Metrics: []trainer.Metric{{Name: "loss", Value: "0.01"}},
		LastUpdatedTime: metav1.NewTime(time.Date(2026, 11, 23, 10, 5, 0, 0, time.UTC))}
	if diff := cmp.Diff(want, h.trainerStatus(t, ns, "mnist"), cmpTime); diff != "" {
		t.Errorf("trainerStatus after a second report (-want +got):\n%s", diff)
	}
}

var cmpTime = cmp.Comparer(func(a, b metav1.Time) bool { return a.Equal(&b) })

// statusOwners lists the managers that own a field of status.<field>.
func statusOwners(mf []metav1.ManagedFieldsEntry, field string) []string {
	var out []string
	for _, e := range mf {
		if e.Subresource == "status" && e.FieldsV1 != nil && strings.Contains(e.FieldsV1.GetRawString(), `"f:`+field+`"`) {
			out = append(out, e.Manager)
		}
	}
	return out
}

// createRuntime installs runtimes/plain-ml.yaml under another name.
func createRuntime(t *testing.T, c client.Client, name string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "runtimes", "plain-ml.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rt trainer.ClusterTrainingRuntime
	if err := yaml.Unmarshal(b, &rt); err != nil {
		t.Fatal(err)
	}
	rt.Name = name
	if err := c.Create(context.Background(), &rt); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), &rt) })
}

// TestStatusServerMeasured measures what the closing note of issue #16 asks
// for; it logs numbers and asserts only correctness (no timing):
//   - latency from a POST to the value being visible with a GET, over 50
//     reports spaced past the write interval;
//   - the writes a flood of reports from one job costs (1000 POSTs/s for 3s,
//     32 concurrent clients).
func TestStatusServerMeasured(t *testing.T) {
	if os.Getenv("TRAINYARD_MEASURE") == "" {
		prereq.Optional(t, "a measurement (about a minute): set TRAINYARD_MEASURE=1")
	}
	h := start(t, time.Second)
	ns := framework.NewNamespace(t, h.env.Client, "measure")
	h.trainJob(t, ns, "flood", "none")
	auth := "Bearer " + h.token(t, ns, h.pod(t, ns, "flood-node-0-0", "flood"), "flood")
	body := func(p int) []byte {
		return []byte(fmt.Sprintf(`{"trainerStatus":{"progressPercentage":%d,"lastUpdatedTime":"2026-11-23T10:00:00Z"}}`, p))
	}

	var lat []time.Duration
	for i := 0; i < 50; i++ {
		h.co.Wait() // the job's writer is idle (an interval after its last write): this report is written at once
		p := i % 101
		begin := time.Now()
		if got := h.post(t, ns, "flood", auth, body(p)); got.code != 200 {
			t.Fatalf("POST = %d %q", got.code, got.msg)
		}
		for {
			st := h.trainerStatus(t, ns, "flood")
			if st != nil && st.ProgressPercentage != nil && int(*st.ProgressPercentage) == p {
				break
			}
			time.Sleep(time.Millisecond)
		}
		lat = append(lat, time.Since(begin))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	t.Logf("POST to visible (idle job, %d reports): median %v, p90 %v, max %v", len(lat), lat[len(lat)/2], lat[len(lat)*9/10], lat[len(lat)-1])

	h.co.Wait()
	before := h.writes.Load()
	const rate, seconds, clients = 1000, 3, 32
	var sent atomic.Int64
	var wg sync.WaitGroup
	begin := time.Now()
	for w := 0; w < clients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(time.Second * clients / rate)
			defer tick.Stop()
			for range tick.C {
				n := sent.Add(1)
				if n > rate*seconds {
					return
				}
				if got := h.post(t, ns, "flood", auth, body(int(n%100))); got.code != 200 {
					t.Errorf("POST = %d %q", got.code, got.msg)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(begin)
	final := []byte(`{"trainerStatus":{"progressPercentage":100,"lastUpdatedTime":"2026-11-23T10:00:00Z"}}`)
	if got := h.post(t, ns, "flood", auth, final); got.code != 200 {
		t.Fatalf("POST = %d", got.code)
	}
	h.co.Wait()
	writes := h.writes.Load() - before
	t.Logf("flood: %d POSTs in %v (%.0f/s) from one job -> %d writes (%.1f/s) with a 1s write interval",
		rate*seconds+1, elapsed.Round(time.Millisecond), float64(rate*seconds)/elapsed.Seconds(), writes, float64(writes)/elapsed.Seconds())
	if st := h.trainerStatus(t, ns, "flood"); st == nil || st.ProgressPercentage == nil || *st.ProgressPercentage != 100 {
		t.Errorf("after the flood trainerStatus = %+v, want the last report (100%%)", st)
	}
}
