package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"k8s.io/apimachinery/pkg/types"

	"github.com/trainyard/trainyard/pkg/controller/jobframework"
)

// Names the webhook manifests (manifests/base/webhook) use.
const (
	validatingWebhookConfiguration = "trainyard-validating-webhook-configuration"
	mutatingWebhookConfiguration   = "trainyard-mutating-webhook-configuration"
)

// webhookOptions say where the serving certificate comes from.
type webhookOptions struct {
	enabled        bool
	certManagement string // "internal": Trainyard creates and rotates it; "external": mounted (cert-manager)
	namespace      string
	serviceName    string
	secretName     string
	certDir        string
	// clusterDomain is the cluster's DNS domain (--cluster-domain): the
	// serving certificate also names <service>.<namespace>.svc.<clusterDomain>.
	clusterDomain string
}

// certRotator is cert-controller's rotator for the internal certificate
// management: a CA of its own and a serving certificate for the webhook
// Service, by its short name (<service>.<namespace>.svc, the name the API
// server calls) and its fully qualified one in the cluster's DNS domain,
// kept in the Secret and injected into both webhook configurations.
func certRotator(o webhookOptions, ready chan struct{}) *rotator.CertRotator {
	svc := fmt.Sprintf("%s.%s.svc", o.serviceName, o.namespace)
	return &rotator.CertRotator{
		SecretKey:      types.NamespacedName{Namespace: o.namespace, Name: o.secretName},
		CertDir:        o.certDir,
		CAName:         "trainyard-ca",
		CAOrganization: "trainyard",
		DNSName:        svc,
		ExtraDNSNames:  []string{svc + "." + o.clusterDomain},
		IsReady:        ready,
		Webhooks: []rotator.WebhookInfo{
			{Name: validatingWebhookConfiguration, Type: rotator.Validating},
			{Name: mutatingWebhookConfiguration, Type: rotator.Mutating},
		},
		FieldOwner: "trainyard",
		// Every replica serves webhooks, leader or not, so every replica
		// needs the certificate: the rotators of all replicas run, and
		// update the one Secret with optimistic concurrency.
		RequireLeaderElection: false,
	}
}

// setupWebhooks registers the webhooks once their serving certificate is in
// place. With internal certificate management, cert-controller creates a CA and a
// serving certificate in the (pre-existing) Secret, injects the CA into the
// webhook configurations, and rotates both before they expire; the kubelet
// projects that Secret into certDir (a volume), which cert-controller waits for.
func setupWebhooks(m *jobframework.Manager, kinds []jobframework.Kind, o webhookOptions) (ready func(*http.Request) error, err error) {
	mgr := m.Manager
	if !o.enabled {
		return func(*http.Request) error { return nil }, nil
	}
	certsReady := make(chan struct{})
	switch o.certManagement {
	case "internal":
		if o.namespace == "" {
			return nil, fmt.Errorf("internal certificate management needs the manager's namespace (--namespace or POD_NAMESPACE)")
		}
		if o.clusterDomain == "" {
			return nil, fmt.Errorf("internal certificate management needs the cluster's DNS domain (--cluster-domain)")
		}
		if err := rotator.AddRotator(mgr, certRotator(o, certsReady)); err != nil {
			return nil, fmt.Errorf("setting up certificate rotation: %w", err)
		}
	case "external":
		close(certsReady)
	default:
		return nil, fmt.Errorf("--cert-management must be internal or external, not %q", o.certManagement)
	}

	setupErr := make(chan error, 1)
	go func() {
		<-certsReady
		setupErr <- jobframework.SetupWebhooks(m, kinds)
	}()
	var failed error
	return func(req *http.Request) error {
		select {
		case <-certsReady:
		default:
			return fmt.Errorf("webhook certificate not ready yet")
		}
		select {
		case err := <-setupErr:
			failed = err
			if err == nil {
				failed = errSetupDone
			}
		default:
		}
		if failed != nil && failed != errSetupDone {
			return fmt.Errorf("registering webhooks: %w", failed)
		}
		if err := mgr.GetWebhookServer().StartedChecker()(req); err != nil {
			return err
		}
		// The webhooks read runtimes through the cache, which the manager
		// starts after the webhook server: until it has synced they would
		// fail (cache not started) or wait, so the replica is not ready to
		// take webhook calls, which the Service sends only to ready pods.
		// Leader or not: every replica runs its cache.
		ctx, cancel := context.WithTimeout(req.Context(), cacheSyncCheck)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return fmt.Errorf("cache not synced yet")
		}
		return nil
	}, nil
}

// cacheSyncCheck bounds how long a readiness check waits for the cache.
const cacheSyncCheck = 200 * time.Millisecond

var errSetupDone = fmt.Errorf("done")
