// Package statusserver is the manager's runtime status server: training code
// POSTs its progress (percentage, time left, metrics) over HTTPS and the
// server writes it into the TrainJob's status.trainerStatus. The protocol is
// Kubeflow Trainer v2.3's (URL, audience, body), so upstream's client code
// works unchanged; see docs/progress.md for where Trainyard is stricter.
package statusserver

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/reviewlimit"
)

// FieldManager owns status.trainerStatus (Kubeflow Trainer's name for it).
const FieldManager = "trainer-status"

// The status subresource is written with server-side apply.
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainjobs/status,verbs=get;update;patch

// DefaultPort is the port of the server (Kubeflow Trainer's).
const DefaultPort = 10443

// Path is the URL path of TrainJob ns/name's status endpoint.
func Path(ns, name string) string {
	return fmt.Sprintf("/apis/trainer.kubeflow.org/v1alpha1/namespaces/%s/trainjobs/%s/status", ns, name)
}

// Handler serves the one route.
type Handler struct {
	Auth *Authorizer
	// Jobs reads TrainJobs (the manager's cache).
	Jobs      client.Reader
	Coalescer *Coalescer
	// Limits are the per-client limits (nil: none).
	Limits *ClientLimits
	Log    logr.Logger
	// Now is the clock for a report without lastUpdatedTime (default time.Now).
	Now func() time.Time
}

// ServeMux returns the handler behind its route; every other path is 404.
func (h *Handler) ServeMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status", h.serve)
	return mux
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request) {
	job := types.NamespacedName{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	log := h.Log.WithValues("trainJob", job)
	if r.ContentLength > MaxBodyBytes {
		fail(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, fmt.Sprintf("invalid payload: body larger than %d bytes", MaxBodyBytes))
		return
	}
	token, ok := bearer(r.Header.Get("Authorization"))
	if !ok {
		if ok, after := h.Limits.Addr().Allow(reviewlimit.SourceAddr(r), time.Now()); !ok {
			throttled(w, &errThrottled{RetryAfter: after})
			return
		}
		fail(w, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "Unauthorized: a bearer token (the pod's projected service account token) is required")
		return
	}
	// A token that passed (or is being renewed) is a client of its own;
	// anything else counts against its source address, before it may cost
	// a TokenReview.
	if err := h.Auth.check(r.Context(), reviewlimit.SourceAddr(r), token, job, h.Limits); err != nil {
		var th *errThrottled
		switch {
		case errors.Is(err, errForbidden):
			log.V(2).Info("Status report forbidden", "reason", err.Error())
			fail(w, http.StatusForbidden, metav1.StatusReasonForbidden, "Forbidden: "+strings.TrimPrefix(err.Error(), errForbidden.Error()+": "))
		case errors.As(err, &th):
			throttled(w, th)
		default:
			log.Error(err, "Authorizing a status report")
			fail(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, "Internal error")
		}
		return
	}
	now := time.Now
	if h.Now != nil {
		now = h.Now
	}
	st, err := Decode(http.MaxBytesReader(w, r.Body, MaxBodyBytes+1), now())
	if err != nil {
		if errors.Is(err, errBadPayload) {
			fail(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error())
			return
		}
		fail(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, "invalid payload: "+err.Error())
		return
	}
	var tj trainer.TrainJob
	if err := h.Jobs.Get(r.Context(), job, &tj); err != nil {
		if apierrors.IsNotFound(err) {
			fail(w, http.StatusNotFound, metav1.StatusReasonNotFound, "Train job not found")
			return
		}
		log.Error(err, "Reading the TrainJob")
		fail(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, "Internal error")
		return
	}
	if st != nil {
		h.Coalescer.Submit(job, st)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"trainerStatus": st})
}

// throttled answers a refusal by a limit: 429 (this client sends too much)
// or 503 (the review budget is spent), with Retry-After.
func throttled(w http.ResponseWriter, th *errThrottled) {
	w.Header().Set("Retry-After", reviewlimit.RetryAfter(th.RetryAfter))
	if th.Budget {
		fail(w, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, "Service unavailable: too many token reviews, retry later")
		return
	}
	fail(w, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, "Too many requests, retry later")
}

// bearer takes the token of an "Authorization: Bearer <token>" header (the
// scheme in any case, any whitespace between, exactly two fields).
func bearer(h string) (string, bool) {
	f := strings.Fields(h)
	if len(f) != 2 || !strings.EqualFold(f[0], "Bearer") {
		return "", false
	}
	return f[1], true
}

// fail answers with a metav1.Status, as the API server and Kubeflow Trainer do.
func fail(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(&metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Message: msg, Reason: reason, Code: int32(code),
	})
}

// ApplyWriter writes trainerStatus with server-side apply on the status
// subresource, as FieldManager and nothing else: each report replaces the
// previous one (metrics is an atomic list), and the controller's own status
// writes, which never touch trainerStatus, leave it alone.
func ApplyWriter(c client.Client) WriteFunc {
	return func(ctx context.Context, key types.NamespacedName, st *trainer.TrainerStatus) error {
		ts, err := k8sruntime.DefaultUnstructuredConverter.ToUnstructured(st)
		if err != nil {
			return fmt.Errorf("converting trainerStatus: %w", err)
		}
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": trainer.GroupVersion.String(),
			"kind":       "TrainJob",
			"metadata":   map[string]any{"name": key.Name, "namespace": key.Namespace},
			"status":     map[string]any{"trainerStatus": ts},
		}}
		if err := c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying the trainerStatus of TrainJob %s: %w", key, err)
		}
		return nil
	}
}

// Timeouts and header bound of the server: a trainer's request is a small
// POST; anything slower or bigger is a client holding a connection open.
const (
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 10 * time.Second
	DefaultWriteTimeout      = 10 * time.Second
	DefaultIdleTimeout       = 90 * time.Second
	// MaxHeaderBytes bounds the request line and headers (a projected
	// token is about 1 KiB; Go's default is 1 MiB).
	MaxHeaderBytes = 16 << 10
)

// Server is the HTTPS server, a manager Runnable that runs on every replica
// (a trainer may reach any of them through the Service).
type Server struct {
	Addr    string
	Handler http.Handler
	// GetCertificate serves the webhook's certificate (hot-reloaded).
	GetCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	Log            logr.Logger
	// Timeouts (0: the Default ones; the read timeouts bound the TLS
	// handshake too).
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration

	// listening is the address Start listens on, once it does.
	listening atomic.Pointer[string]
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (*Server) NeedLeaderElection() bool { return false }

// HTTPServer returns the http.Server that Start runs.
func (s *Server) HTTPServer() *http.Server {
	or := func(d, def time.Duration) time.Duration {
		if d > 0 {
			return d
		}
		return def
	}
	return &http.Server{
		Handler:           s.Handler,
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: s.GetCertificate},
		ReadHeaderTimeout: or(s.ReadHeaderTimeout, DefaultReadHeaderTimeout),
		ReadTimeout:       or(s.ReadTimeout, DefaultReadTimeout),
		WriteTimeout:      or(s.WriteTimeout, DefaultWriteTimeout),
		IdleTimeout:       or(s.IdleTimeout, DefaultIdleTimeout),
		MaxHeaderBytes:    MaxHeaderBytes,
	}
}

// Start serves until ctx ends.
func (s *Server) Start(ctx context.Context) error {
	srv := s.HTTPServer()
	l, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("status server: %w", err)
	}
	s.Log.Info("Serving training status reports", "address", l.Addr().String())
	addr := l.Addr().String()
	s.listening.Store(&addr)
	defer s.listening.Store(nil)
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(l, "", "") }()
	select {
	case err := <-errc:
		return fmt.Errorf("status server: %w", err)
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(shutdown)
	}
}

// Listening returns the address the server listens on, "" before it does
// (it waits for its certificate) and after it stopped.
func (s *Server) Listening() string {
	if a := s.listening.Load(); a != nil {
		return *a
	}
	return ""
}

// Checked is how long a probe waits for the server's TLS handshake.
const Checked = 2 * time.Second

// Ready is the manager's readiness check of the server (Kubeflow Trainer v2.4
// registers its status server in the manager's probes): it completes a TLS
// handshake with the server's listener, which proves that the certificate is
// loaded and connections are accepted, as controller-runtime's check of the
// webhook server does. It fails until the server serves.
func (s *Server) Ready(*http.Request) error {
	addr := s.Listening()
	if addr == "" {
		return errors.New("the status server is not serving (yet): it waits for its serving certificate")
	}
	d := &net.Dialer{Timeout: Checked}
	// The check proves the local listener completes a handshake; the name the
	// certificate is for is not this dial's address, so it is not verified.
	conn, err := tls.DialWithDialer(d, "tcp", dialable(addr), &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) //nolint:gosec // see above
	if err != nil {
		return fmt.Errorf("the status server does not answer: %w", err)
	}
	return conn.Close()
}

// Healthy is the manager's liveness check of the server: once it has started
// serving it must answer (Ready); before that, while it waits for a
// certificate that internal rotation writes after the manager starts, it is
// not dead, only not ready.
func (s *Server) Healthy(r *http.Request) error {
	if s.Listening() == "" {
		return nil
	}
	return s.Ready(r)
}

// dialable turns a listener's wildcard address (":10443" listens as
// "[::]:10443") into the loopback one.
func dialable(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if ip != nil && ip.To4() == nil {
			return net.JoinHostPort("::1", port)
		}
		return net.JoinHostPort("127.0.0.1", port)
	}
	return addr
}
