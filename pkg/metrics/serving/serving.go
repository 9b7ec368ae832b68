// Package serving configures the manager's metrics endpoint. By default it is
// HTTPS, and only clients that the API server authenticates (TokenReview of
// their bearer token) and authorizes for GET on the non-resource URL /metrics
// (SubjectAccessReview; ClusterRole trainyard-metrics-reader) may read it: the
// metrics tell how many jobs run, why they fail and how the manager copes,
// which is more than every pod that can reach the manager should learn. Plain,
// unauthenticated HTTP is an explicit choice (Secure false), for local
// clusters and harnesses on the loopback interface.
package serving

import (
	"errors"
	"net/http"

	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/trainyard/trainyard/pkg/reviewlimit"
)

// Authenticating and authorizing scrapers through the API server needs these;
// the manager's ClusterRole gets them from here.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Default addresses: the conventional HTTPS port of kubebuilder-style
// managers, and the HTTP port the manager used before it served HTTPS.
const (
	DefaultSecureAddress = ":8443"
	DefaultPlainAddress  = ":8080"
)

// Config is what the manager's flags say about the metrics endpoint.
type Config struct {
	// BindAddress is where the endpoint listens; "" means DefaultSecureAddress
	// or DefaultPlainAddress, "0" disables it.
	BindAddress string
	// Secure serves HTTPS with authentication and authorization; false serves
	// plain HTTP to anyone.
	Secure bool
	// CertDir holds tls.crt and tls.key (watched, so a renewed certificate is
	// picked up). Empty: controller-runtime's default directory,
	// <temp dir>/k8s-metrics-server/serving-certs, and a self-signed
	// certificate generated in memory when that has no certificate, which is
	// what the manager's read-only container uses.
	CertDir string
	// Limits bound what scrapers may cost in TokenReviews (nil: Limits(),
	// the status server's defaults; a zero Limits turns them off, as for a
	// flood measured without them).
	Limits *reviewlimit.Limits
}

// Validate rejects combinations that would silently not do what they say.
func (c Config) Validate() error {
	if !c.Secure && c.CertDir != "" {
		return errors.New("--metrics-cert-dir needs --metrics-secure: plain HTTP uses no certificate")
	}
	return nil
}

// Address is the effective bind address.
func (c Config) Address() string {
	switch {
	case c.BindAddress != "":
		return c.BindAddress
	case c.Secure:
		return DefaultSecureAddress
	default:
		return DefaultPlainAddress
	}
}

// Options are the controller-runtime metrics server options for c.
func (c Config) Options() metricsserver.Options {
	o := metricsserver.Options{BindAddress: c.Address()}
	if c.Secure {
		o.SecureServing = true
		limits := Limits()
		if c.Limits != nil {
			limits = *c.Limits
		}
		o.FilterProvider = func(config *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
			return withAuthenticationAndAuthorization(config, httpClient, limits)
		}
		o.CertDir = c.CertDir
	}
	return o
}
