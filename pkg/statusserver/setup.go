package statusserver

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/types"
	authnclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
)

// DefaultCoalesceInterval is the least time between two writes of one
// TrainJob's trainerStatus.
const DefaultCoalesceInterval = time.Second

// Options configure the server in the manager.
type Options struct {
	// Addr is where it listens, e.g. ":10443".
	Addr string
	// CertDir holds tls.crt and tls.key (the webhook's serving certificate).
	CertDir string
	// CoalesceInterval: see Coalescer (default DefaultCoalesceInterval).
	CoalesceInterval time.Duration
	// Limits bound what clients may cost (nil: DefaultLimits).
	Limits *Limits
	// CA, when set, is published in every namespace with TrainJobs
	// (CAPublisher), for the trainers to verify the server with. The manager's
	// cache must then hold ConfigMaps (label-selected, as it does for the
	// children of the plugins that own some).
	CA *CABundle
}

// Setup adds the server to the manager. It serves once the certificate
// files exist (with internal rotation they appear after the manager starts).
func Setup(mgr ctrl.Manager, o Options) error {
	if o.CoalesceInterval <= 0 {
		o.CoalesceInterval = DefaultCoalesceInterval
	}
	limits := DefaultLimits()
	if o.Limits != nil {
		limits = *o.Limits
	}
	if err := limits.Validate(); err != nil {
		return fmt.Errorf("status server: %w", err)
	}
	reviews, err := authnclient.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return fmt.Errorf("status server: %w", err)
	}
	log := ctrl.Log.WithName("status-server")
	co := &Coalescer{
		Interval: o.CoalesceInterval,
		Write:    ApplyWriter(mgr.GetClient()),
		OnError: func(key types.NamespacedName, err error) {
			log.Error(err, "Writing a trainer status report", "trainJob", key)
		},
	}
	h := &Handler{
		Auth:      NewAuthorizer(limits, reviews.TokenReviews(), mgr.GetAPIReader()),
		Jobs:      mgr.GetClient(),
		Coalescer: co,
		Limits:    limits.ClientLimits(),
		Log:       log,
	}
	if o.CA != nil {
		pub := &CAPublisher{Client: mgr.GetClient(), Live: mgr.GetAPIReader(), CA: o.CA, Log: log.WithName("ca")}
		if err := pub.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("status server CA publisher: %w", err)
		}
	}
	r := &runnable{opts: o, handler: h, co: co,
		server: &Server{Addr: o.Addr, Handler: h.ServeMux(), Log: h.Log}}
	// The server is part of the manager's health, as Kubeflow Trainer v2.4's
	// is: /readyz fails until it serves, /healthz once it stopped answering.
	if err := mgr.AddHealthzCheck(CheckName, r.server.Healthy); err != nil {
		return fmt.Errorf("status server: %w", err)
	}
	if err := mgr.AddReadyzCheck(CheckName, r.server.Ready); err != nil {
		return fmt.Errorf("status server: %w", err)
	}
	return mgr.Add(r)
}

// CheckName names the server's checks in the manager's /healthz and /readyz
// (e.g. /readyz/status-server).
const CheckName = "status-server"

// runnable waits for the certificate, then serves it hot-reloaded.
type runnable struct {
	opts    Options
	handler *Handler
	co      *Coalescer
	server  *Server
}

func (*runnable) NeedLeaderElection() bool { return false }

func (r *runnable) Start(ctx context.Context) error {
	r.co.Start(ctx)
	var cw *certwatcher.CertWatcher
	for {
		var err error
		cw, err = certwatcher.New(filepath.Join(r.opts.CertDir, "tls.crt"), filepath.Join(r.opts.CertDir, "tls.key"))
		if err == nil {
			break
		}
		r.handler.Log.V(1).Info("Waiting for the serving certificate", "error", err.Error())
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
	go func() {
		if err := cw.Start(ctx); err != nil {
			r.handler.Log.Error(err, "Watching the serving certificate")
		}
	}()
	r.server.GetCertificate = cw.GetCertificate
	err := r.server.Start(ctx)
	r.co.Wait()
	return err
}
