package webhooks

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/webhooks"
	"github.com/trainyard/trainyard/test/integration/framework"
)

// Flood parameters: concurrent senders and how long they send.
const (
	floodSenders = 32
	floodFor     = 3 * time.Second
)

// floodResult is what a flood of AdmissionReviews naming runtimes that do
// not exist cost.
type floodResult struct {
	sent      int64
	answers   map[string]int64
	liveReads int64
	elapsed   time.Duration
}

func (r floodResult) String() string {
	return fmt.Sprintf("%d AdmissionReviews naming distinct missing runtimes in %v (%.0f/s): %d live reads of the API server (%.1f/s), answers %v",
		r.sent, r.elapsed.Round(time.Millisecond), float64(r.sent)/r.elapsed.Seconds(),
		r.liveReads, float64(r.liveReads)/r.elapsed.Seconds(), r.answers)
}

// floodWebhook posts AdmissionReviews for TrainJobs that each name another
// ClusterTrainingRuntime that does not exist straight to the webhook server,
// as a pod that reaches its port can (admission callers are not
// authenticated), floodSenders at a time for floodFor, while during runs.
// Live reads are the API server's GETs of clustertrainingruntimes
// (apiserver_request_total): nothing else reads them meanwhile.
func floodWebhook(t *testing.T, during func()) floodResult {
	t.Helper()
	before := runtimeGets(t)
	url := "https://" + env.WebhookAddress() + "/validate-trainer-kubeflow-org-v1alpha1-trainjob"
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // an attacker checks nothing either
		MaxIdleConnsPerHost: floodSenders,
	}}
	var sent atomic.Int64
	var mu sync.Mutex
	answers := map[string]int64{}
	ctx, stop := context.WithTimeout(context.Background(), floodFor)
	defer stop()
	var wg sync.WaitGroup
	begin := time.Now()
	for range floodSenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				n := sent.Add(1)
				answer := post(hc, url, n)
				mu.Lock()
				answers[answer]++
				mu.Unlock()
			}
		}()
	}
	during()
	wg.Wait()
	elapsed := time.Since(begin)
	return floodResult{sent: sent.Load(), answers: answers, elapsed: elapsed, liveReads: runtimeGets(t) - before}
}

// post sends review n and sorts its answer: "not found" (the runtime was
// looked up and is missing), "throttled" (the lookup was refused by the live
// read bound), or what else came back.
func post(hc *http.Client, url string, n int64) string {
	tj := &trainer.TrainJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind},
		ObjectMeta: metav1.ObjectMeta{Namespace: "flood", Name: fmt.Sprintf("job-%d", n)},
		Spec:       trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: fmt.Sprintf("missing-%d", n)}},
	}
	raw, _ := json.Marshal(tj)
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID("flood-" + strconv.FormatInt(n, 10)),
			Kind:      metav1.GroupVersionKind{Group: trainer.GroupVersion.Group, Version: trainer.GroupVersion.Version, Kind: trainer.TrainJobKind},
			Resource:  metav1.GroupVersionResource{Group: trainer.GroupVersion.Group, Version: trainer.GroupVersion.Version, Resource: "trainjobs"},
			Namespace: tj.Namespace, Name: tj.Name, Operation: admissionv1.Create,
			Object: runtime.RawExtension{Raw: raw},
		},
	}
	body, _ := json.Marshal(review)
	resp, err := hc.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return "error"
	}
	defer func() { _ = resp.Body.Close() }()
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Response == nil {
		return fmt.Sprintf("HTTP %d", resp.StatusCode)
	}
	if out.Response.Allowed {
		return "allowed"
	}
	msg := ""
	if out.Response.Result != nil {
		msg = out.Response.Result.Message
	}
	switch {
	case strings.Contains(msg, "too many"):
		return "throttled"
	case strings.Contains(msg, "Not found"):
		return "not found"
	}
	return "other: " + msg
}

// runtimeGets is the API server's count of GETs of clustertrainingruntimes.
func runtimeGets(t *testing.T) int64 {
	t.Helper()
	n, err := framework.APIServerRequests(env.Config, "clustertrainingruntimes", "GET")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestLiveReadFlood (issue #40): a flood of AdmissionReviews, each naming a
// runtime that does not exist (a miss of the manager's cache, which the
// webhook answers by reading the API server), costs at most the live read
// bound (burst + rate × time) of GETs; the rest are refused without one; a
// real TrainJob created through the API server meanwhile is admitted. With
// TRAINYARD_MEASURE=1 the same flood also runs without the bound (the
// webhook before issue #40) for comparison.
func TestLiveReadFlood(t *testing.T) {
	ns := newNamespace(t)
	newRuntime(t, ns, "rt")
	// The runtime reaches the manager's cache; the TrainJob below needs no live read.
	time.Sleep(time.Second)

	var admitted time.Duration
	var createErr error
	r := floodWebhook(t, func() {
		time.Sleep(floodFor / 2)
		start := time.Now()
		createErr = env.Client.Create(ctx(), job(ns, "real", nil))
		admitted = time.Since(start)
	})
	t.Logf("with the bound (%d/s, burst %d, NotFound believed %v): %v", webhooks.DefaultLiveReadQPS, webhooks.DefaultLiveReadBurst, webhooks.DefaultLiveNotFoundTTL, r)
	if createErr != nil {
		t.Errorf("a TrainJob created during the flood: %v", createErr)
	}
	t.Logf("the real TrainJob was admitted in %v during the flood", admitted.Round(time.Millisecond))
	bound := int64(webhooks.DefaultLiveReadBurst) + int64(webhooks.DefaultLiveReadQPS*r.elapsed.Seconds()) + 1
	if r.liveReads > bound {
		t.Errorf("%d live reads in %v, want at most %d (burst %d + %d/s)", r.liveReads, r.elapsed, bound, webhooks.DefaultLiveReadBurst, webhooks.DefaultLiveReadQPS)
	}
	if r.answers["throttled"] == 0 || r.answers["not found"] == 0 {
		t.Errorf("answers %v: want both not found (looked up) and throttled (the bound)", r.answers)
	}
	if r.answers["not found"] > r.liveReads {
		t.Errorf("%d answers say not found, from %d live reads", r.answers["not found"], r.liveReads)
	}

	if os.Getenv("TRAINYARD_MEASURE") == "" {
		return
	}
	prev := webhooks.SetLiveReads(nil)
	defer webhooks.SetLiveReads(prev)
	r = floodWebhook(t, func() {})
	t.Logf("without the bound: %v", r)
}
