package serving

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestOptions(t *testing.T) {
	// What the manager's metrics server gets; the filter is a function, so
	// only whether there is one is compared.
	type got struct {
		BindAddress   string
		SecureServing bool
		Filter        bool
		CertDir       string
		Err           string
	}
	for name, tc := range map[string]struct {
		cfg  Config
		want got
	}{
		"default: HTTPS with authentication and authorization": {
			Config{Secure: true},
			got{BindAddress: ":8443", SecureServing: true, Filter: true},
		},
		"a certificate directory": {
			Config{Secure: true, CertDir: "/certs"},
			got{BindAddress: ":8443", SecureServing: true, Filter: true, CertDir: "/certs"},
		},
		"an address of one's own": {
			Config{Secure: true, BindAddress: "127.0.0.1:9443"},
			got{BindAddress: "127.0.0.1:9443", SecureServing: true, Filter: true},
		},
		"plain HTTP, asked for": {
			Config{Secure: false},
			got{BindAddress: ":8080"},
		},
		"plain HTTP on an address of one's own": {
			Config{Secure: false, BindAddress: "127.0.0.1:18080"},
			got{BindAddress: "127.0.0.1:18080"},
		},
		"disabled": {
			Config{Secure: true, BindAddress: "0"},
			got{BindAddress: "0", SecureServing: true, Filter: true},
		},
		"a certificate for plain HTTP": {
			Config{Secure: false, CertDir: "/certs"},
			got{BindAddress: ":8080", Err: "--metrics-cert-dir needs --metrics-secure: plain HTTP uses no certificate"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			o := tc.cfg.Options()
			g := got{BindAddress: o.BindAddress, SecureServing: o.SecureServing, Filter: o.FilterProvider != nil, CertDir: o.CertDir}
			if err := tc.cfg.Validate(); err != nil {
				g.Err = err.Error()
			}
			if diff := cmp.Diff(tc.want, g); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
