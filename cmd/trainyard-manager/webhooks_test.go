package main

import (
	"slices"
	"testing"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"k8s.io/apimachinery/pkg/types"
)

// TestCertRotator checks the internal rotator's certificate names: the
// webhook Service's short name, which the API server calls, and its fully
// qualified name in the domain of --cluster-domain, not always cluster.local.
func TestCertRotator(t *testing.T) {
	for _, domain := range []string{"cluster.local", "corp.example"} {
		t.Run(domain, func(t *testing.T) {
			o := webhookOptions{certManagement: "internal", namespace: "ty-system", serviceName: "ty-webhook",
				secretName: "ty-cert", certDir: "/certs", clusterDomain: domain}
			ready := make(chan struct{})
			r := certRotator(o, ready)
			if want := "ty-webhook.ty-system.svc"; r.DNSName != want {
				t.Errorf("DNSName %q, want %q", r.DNSName, want)
			}
			if want := []string{"ty-webhook.ty-system.svc." + domain}; !slices.Equal(r.ExtraDNSNames, want) {
				t.Errorf("ExtraDNSNames %q, want %q", r.ExtraDNSNames, want)
			}
			if want := (types.NamespacedName{Namespace: "ty-system", Name: "ty-cert"}); r.SecretKey != want {
				t.Errorf("SecretKey %v, want %v", r.SecretKey, want)
			}
			if r.CertDir != "/certs" || r.IsReady != ready {
				t.Errorf("CertDir %q, IsReady %v: want /certs and the given channel", r.CertDir, r.IsReady)
			}
			if r.RequireLeaderElection {
				t.Error("RequireLeaderElection: every replica serves webhooks and needs the certificate, leader or not")
			}
			want := []rotator.WebhookInfo{
				{Name: validatingWebhookConfiguration, Type: rotator.Validating},
				{Name: mutatingWebhookConfiguration, Type: rotator.Mutating},
			}
			if !slices.Equal(r.Webhooks, want) {
				t.Errorf("Webhooks %v, want %v", r.Webhooks, want)
			}
		})
	}
}
