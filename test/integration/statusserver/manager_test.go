package statusserver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/controller"
	"github.com/trainyard/trainyard/pkg/statusserver"
	"github.com/trainyard/trainyard/test/integration/framework"
)

// TestSetupInManager runs the server as the manager does (statusserver.Setup:
// the certificate from a directory that is filled only after the manager
// starts, HTTPS, and the CA published in each namespace with TrainJobs),
// with the manager's ServiceAccount bound to exactly the ClusterRole of
// manifests/base, which therefore must allow the token reviews, the pod
// reads, the status writes and the CA ConfigMap's create, patch and delete
// (the latter by name only), and that the publisher repairs a planted CA and
// leaves a user's ConfigMap of that name alone.
func TestSetupInManager(t *testing.T) {
	h := start(t, 10*time.Millisecond)
	ctx := context.Background()
	c := h.env.Client
	ns := framework.NewNamespace(t, c, "setup")

	b, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "manifests", "base", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(b, &role); err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{&role,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "trainyard-manager", Namespace: ns}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "status-manager"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "trainyard-manager", Namespace: ns}}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("creating %s: %v", o.GetName(), err)
		}
	}
	tr, err := h.cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "trainyard-manager", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(h.env.Config)
	cfg.BearerToken = tr.Status.Token

	cacheOpts, err := controller.CacheOptions(cfg, h.env.Scheme, &corev1.ConfigMap{}) // as cmd/trainyard-manager
	if err != nil {
		t.Fatal(err)
	}
	probeAddr := freeAddress(t)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: h.env.Scheme, Cache: cacheOpts,
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: probeAddr})
	if err != nil {
		t.Fatal(err)
	}
	certDir, addr := t.TempDir(), freeAddress(t)
	ca := &statusserver.CABundle{Path: filepath.Join(certDir, "ca.crt"), Interval: 50 * time.Millisecond, Log: ctrl.Log}
	if err := mgr.Add(ca); err != nil {
		t.Fatal(err)
	}
	if err := statusserver.Setup(mgr, statusserver.Options{Addr: addr, CertDir: certDir, CoalesceInterval: 10 * time.Millisecond, CA: ca}); err != nil {
		t.Fatal(err)
	}
	mgrCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(mgrCtx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	t.Cleanup(func() { stop(); <-done })

	// The server is in the manager's probes (Kubeflow Trainer v2.4): not
	// ready while it waits for its certificate, yet alive.
	probe := func(path string) (int, string, error) {
		resp, err := http.Get("http://" + probeAddr + path)
		if err != nil {
			return 0, "", err
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	framework.Eventually(t, func() error {
		code, body, err := probe("/readyz/" + statusserver.CheckName)
		if err != nil {
			return err
		}
		if code != http.StatusInternalServerError || !strings.Contains(body, "waits for its serving certificate") {
			return errStr(fmt.Sprintf("readyz/status-server before the certificate: %d %q", code, body))
		}
		return nil
	})
	if code, body, err := probe("/healthz/" + statusserver.CheckName); err != nil || code != http.StatusOK {
		t.Errorf("healthz/status-server while waiting for the certificate: %d %q %v; want 200", code, body, err)
	}
	pool := writeServingCert(t, certDir) // after the start, as cert-controller does
	for _, path := range []string{"/readyz", "/healthz", "/readyz/" + statusserver.CheckName} {
		framework.Eventually(t, func() error {
			code, body, err := probe(path)
			if err == nil && code != http.StatusOK {
				err = errStr(fmt.Sprintf("%s: %d %q", path, code, body))
			}
			return err
		})
	}

	h.trainJob(t, ns, "mnist", "none")
	good := "Bearer " + h.token(t, ns, h.pod(t, ns, "mnist-node-0-0", "mnist"), "mnist")
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	post := func(auth string) (int, error) {
		req, err := http.NewRequest(http.MethodPost, "https://"+addr+statusserver.Path(ns, "mnist"), strings.NewReader(upstreamBody))
		if err != nil {
			return 0, err
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode, nil
	}
	framework.Eventually(t, func() error { _, err := post(""); return err }) // serving once the certificate is there
	if code, err := post(""); err != nil || code != http.StatusUnauthorized {
		t.Errorf("POST without a token = %d, %v; want 401", code, err)
	}
	if code, err := post(good); err != nil || code != http.StatusOK {
		t.Fatalf("POST = %d, %v; want 200", code, err)
	}
	framework.Eventually(t, func() error {
		if st := h.trainerStatus(t, ns, "mnist"); st == nil || st.ProgressPercentage == nil || *st.ProgressPercentage != 42 {
			return errStr("trainerStatus not written yet")
		}
		return nil
	})

	// The namespace's CA ConfigMap: the CA trainers verify the server with,
	// again after it rotates, and gone with the namespace's last TrainJob.
	published := func(want string) {
		t.Helper()
		framework.Eventually(t, func() error {
			var cm corev1.ConfigMap
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: statusserver.CAConfigMapName}, &cm); err != nil {
				return err
			}
			if got := cm.Data[statusserver.CAKey]; got != want {
				return errStr(fmt.Sprintf("%s holds %d bytes, want the %d of ca.crt", statusserver.CAConfigMapName, len(got), len(want)))
			}
			return nil
		})
	}
	readCA := func() string {
		b, err := os.ReadFile(filepath.Join(certDir, "ca.crt"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	published(readCA())
	writeServingCert(t, certDir) // a new CA
	published(readCA())

	// Issue #40: whoever may write ConfigMaps in the namespace plants a CA
	// of their own, keeping the label and the hash annotation (all the
	// manager's cache shows): the manager reads it and publishes the CA again.
	var cm corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: statusserver.CAConfigMapName}, &cm); err != nil {
		t.Fatal(err)
	}
	cm.Data[statusserver.CAKey] = selfSignedPEM(t, "planted")
	if err := c.Update(ctx, &cm, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	published(readCA())

	// A ConfigMap of that name a user made, labelled as the manager's: the
	// manager deletes it not in a namespace without TrainJobs, and patches it
	// not in one with a TrainJob (it is not the manager's to change).
	theirs := map[string]string{}
	for _, withJob := range []bool{false, true} {
		// The user's ConfigMap comes first: once a TrainJob is there the
		// manager publishes its own, and the name is taken.
		other := framework.NewNamespace(t, c, "planted")
		planted := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: statusserver.CAConfigMapName,
			Labels: map[string]string{"trainyard.io/managed-by": "trainyard"}}, Data: map[string]string{statusserver.CAKey: selfSignedPEM(t, other)}}
		if err := c.Create(ctx, planted, client.FieldOwner("kubectl-create")); err != nil {
			t.Fatal(err)
		}
		if withJob {
			h.trainJob(t, other, "mnist", "none")
		}
		theirs[other] = planted.Data[statusserver.CAKey]
	}
	framework.Consistently(t, 3*time.Second, func() error {
		for other, want := range theirs {
			var cm corev1.ConfigMap
			if err := c.Get(ctx, client.ObjectKey{Namespace: other, Name: statusserver.CAConfigMapName}, &cm); err != nil {
				return fmt.Errorf("the user's ConfigMap in %s: %w", other, err)
			}
			if cm.Data[statusserver.CAKey] != want {
				return errStr(fmt.Sprintf("the user's ConfigMap in %s was changed", other))
			}
		}
		return nil
	})
	if err := c.Delete(ctx, &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mnist"}}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, func() error {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: statusserver.CAConfigMapName}, &corev1.ConfigMap{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return errStr(fmt.Sprintf("%s still there after the last TrainJob went: %v", statusserver.CAConfigMapName, err))
	})
}

type errStr string

func (e errStr) Error() string { return string(e) }

func freeAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// selfSignedPEM is a PEM CA certificate named cn.
func selfSignedPEM(t *testing.T, cn string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now(),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// writeServingCert writes a CA-signed serving certificate for 127.0.0.1 into
// dir (tls.crt, tls.key, ca.crt) and returns the CA as a pool.
func writeServingCert(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"}, NotBefore: now.Add(-time.Hour),
		NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"}, NotBefore: now.Add(-time.Hour),
		NotAfter: now.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for name, blk := range map[string]*pem.Block{
		"ca.crt": {Type: "CERTIFICATE", Bytes: caDER}, "tls.crt": {Type: "CERTIFICATE", Bytes: der}, "tls.key": {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(blk), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return pool
}
