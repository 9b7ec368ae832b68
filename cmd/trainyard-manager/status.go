package main

import (
	"flag"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/trainyard/trainyard/pkg/statusserver"
)

// statusOptions configure the runtime status server (pkg/statusserver).
type statusOptions struct {
	enabled  bool
	bind     string
	url      string
	caFile   string
	interval time.Duration
	limits   statusserver.Limits
}

func (o *statusOptions) bindFlags(fs *flag.FlagSet) {
	fs.BoolVar(&o.enabled, "enable-status-server", true, "serve the runtime status server, where training code reports progress into status.trainerStatus, and give trainer pods its URL, a token and its CA (Kubeflow Trainer's TrainJobStatus)")
	fs.StringVar(&o.bind, "status-server-bind-address", fmt.Sprintf(":%d", statusserver.DefaultPort), "address of the status server (HTTPS, with the webhook's serving certificate)")
	fs.StringVar(&o.url, "status-server-url", "", "scheme, host and port at which trainer pods reach the status server (default https://<webhook service>.<namespace>.svc:<port>, the name the webhook certificate is for)")
	fs.StringVar(&o.caFile, "status-server-ca-file", "", "PEM CA bundle trainers trust for the status server, re-read every 10s (default <webhook cert dir>/ca.crt)")
	fs.DurationVar(&o.interval, "status-server-write-interval", statusserver.DefaultCoalesceInterval, "least time between two writes of one TrainJob's trainerStatus; reports in between are coalesced, the latest wins")
	d, l := statusserver.DefaultLimits(), &o.limits
	fs.Float64Var(&l.ClientQPS, "status-server-client-qps", d.ClientQPS, "status server requests per second per source address (TCP peer; no header is trusted) whose token has not passed yet: no token, a bogus one, one to review; over it: 429 with Retry-After (0: no limit)")
	fs.IntVar(&l.ClientBurst, "status-server-client-burst", d.ClientBurst, "burst of --status-server-client-qps")
	fs.Float64Var(&l.TokenQPS, "status-server-token-qps", d.TokenQPS, "status server requests per second per token that passed (a trainer), whatever its address; over it: 429 with Retry-After (0: no limit)")
	fs.IntVar(&l.TokenBurst, "status-server-token-burst", d.TokenBurst, "burst of --status-server-token-qps")
	fs.Float64Var(&l.ReviewQPS, "status-server-token-review-qps", d.ReviewQPS, "TokenReviews per second the status server of one replica may ask the API server for, whoever sends the tokens; over it: 503 with Retry-After, the API server is not asked (0: no limit)")
	fs.IntVar(&l.ReviewBurst, "status-server-token-review-burst", d.ReviewBurst, "burst of --status-server-token-review-qps (a quarter of it is kept for renewing the verdicts of tokens that passed)")
	fs.IntVar(&l.CacheSize, "status-server-token-cache-size", d.CacheSize, "verdicts on tokens the status server keeps, least recently used first out, in each of two caches (positive, negative); tokens are kept as keyed hashes")
	fs.DurationVar(&l.CacheTTL, "status-server-token-cache-ttl", d.CacheTTL, "how long a positive verdict on a token (TokenReview and pod check) is served before the token is reviewed again")
	fs.DurationVar(&l.NegativeCacheTTL, "status-server-token-cache-negative-ttl", d.NegativeCacheTTL, "how long a negative verdict on a token is served")
}

// setupStatusServer adds the server and the CA reader to the manager and
// returns the URL at which trainers reach it ("" when the server is off).
func setupStatusServer(mgr ctrl.Manager, o statusOptions, wh webhookOptions) (string, error) {
	if !o.enabled {
		return "", nil
	}
	if err := o.limits.Validate(); err != nil {
		return "", fmt.Errorf("status server limits: %w", err)
	}
	if !wh.enabled && wh.certManagement == "internal" && o.caFile == "" {
		// The server serves the webhook's certificate, which nobody makes
		// when the webhooks are off and Trainyard would be the one to rotate it.
		ctrl.Log.WithName("setup").Info("Status server off: it uses the webhook serving certificate, which internal certificate management makes only with --enable-webhooks")
		return "", nil
	}
	url := o.url
	if url == "" {
		if wh.namespace == "" {
			return "", fmt.Errorf("the status server needs --status-server-url, or the manager's namespace (--namespace or POD_NAMESPACE) to build it")
		}
		_, port, err := net.SplitHostPort(o.bind)
		if err != nil {
			return "", fmt.Errorf("--status-server-bind-address %q: %w", o.bind, err)
		}
		url = fmt.Sprintf("https://%s.%s.svc:%s", wh.serviceName, wh.namespace, port)
	}
	if !strings.HasPrefix(url, "https://") {
		return "", fmt.Errorf("--status-server-url %q: must be https://", url)
	}
	caFile := o.caFile
	if caFile == "" {
		caFile = filepath.Join(wh.certDir, "ca.crt")
	}
	ca := &statusserver.CABundle{Path: caFile, Log: ctrl.Log.WithName("status-server")}
	_ = ca.Load() // with internal rotation the file appears after start; Start keeps trying
	if err := mgr.Add(ca); err != nil {
		return "", err
	}
	if err := statusserver.Setup(mgr, statusserver.Options{
		Addr: o.bind, CertDir: wh.certDir, CoalesceInterval: o.interval, Limits: &o.limits, CA: ca,
	}); err != nil {
		return "", fmt.Errorf("setting up the status server: %w", err)
	}
	return url, nil
}
