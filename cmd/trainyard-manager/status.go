package main

import (
	"flag"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/trainyard/trainyard/pkg/runtime/plugins/progress"
	"github.com/trainyard/trainyard/pkg/statusserver"
)

// statusOptions configure the runtime status server (pkg/statusserver).
type statusOptions struct {
	enabled  bool
	bind     string
	url      string
	caFile   string
	interval time.Duration
}

func (o *statusOptions) bindFlags(fs *flag.FlagSet) {
	fs.BoolVar(&o.enabled, "enable-status-server", true, "serve the runtime status server, where training code reports progress into status.trainerStatus, and give trainer pods its URL, a token and its CA (Kubeflow Trainer's TrainJobStatus)")
	fs.StringVar(&o.bind, "status-server-bind-address", fmt.Sprintf(":%d", statusserver.DefaultPort), "address of the status server (HTTPS, with the webhook's serving certificate)")
	fs.StringVar(&o.url, "status-server-url", "", "scheme, host and port at which trainer pods reach the status server (default https://<webhook service>.<namespace>.svc:<port>, the name the webhook certificate is for)")
	fs.StringVar(&o.caFile, "status-server-ca-file", "", "PEM CA bundle trainers trust for the status server, re-read every 10s (default <webhook cert dir>/ca.crt)")
	fs.DurationVar(&o.interval, "status-server-write-interval", statusserver.DefaultCoalesceInterval, "least time between two writes of one TrainJob's trainerStatus; reports in between are coalesced, the latest wins")
}

// setupStatusServer adds the server and the CA reader to the manager and
// returns what the progress plugin needs (nil when the server is off).
func setupStatusServer(mgr ctrl.Manager, o statusOptions, wh webhookOptions) (*progress.Config, error) {
	if !o.enabled {
		return nil, nil
	}
	if !wh.enabled && wh.certManagement == "internal" && o.caFile == "" {
		// The server serves the webhook's certificate, which nobody makes
		// when the webhooks are off and Trainyard would be the one to rotate it.
		ctrl.Log.WithName("setup").Info("Status server off: it uses the webhook serving certificate, which internal certificate management makes only with --enable-webhooks")
		return nil, nil
	}
	url := o.url
	if url == "" {
		if wh.namespace == "" {
			return nil, fmt.Errorf("the status server needs --status-server-url, or the manager's namespace (--namespace or POD_NAMESPACE) to build it")
		}
		_, port, err := net.SplitHostPort(o.bind)
		if err != nil {
			return nil, fmt.Errorf("--status-server-bind-address %q: %w", o.bind, err)
		}
		url = fmt.Sprintf("https://%s.%s.svc:%s", wh.serviceName, wh.namespace, port)
	}
	if !strings.HasPrefix(url, "https://") {
		return nil, fmt.Errorf("--status-server-url %q: must be https://", url)
	}
	caFile := o.caFile
	if caFile == "" {
		caFile = filepath.Join(wh.certDir, "ca.crt")
	}
	ca := &statusserver.CABundle{Path: caFile, Log: ctrl.Log.WithName("status-server")}
	_ = ca.Load() // with internal rotation the file appears after start; Start keeps trying
	if err := mgr.Add(ca); err != nil {
		return nil, err
	}
	if err := statusserver.Setup(mgr, statusserver.Options{
		Addr: o.bind, CertDir: wh.certDir, CoalesceInterval: o.interval,
	}); err != nil {
		return nil, fmt.Errorf("setting up the status server: %w", err)
	}
	return &progress.Config{BaseURL: url, CA: ca.Get}, nil
}
