// Package metrics checks the manager's metrics endpoint against a real
// kube-apiserver: served over HTTPS, it answers only scrapers whose bearer
// token the API server authenticates and authorizes for GET /metrics, with
// the manager running under its ServiceAccount and exactly the ClusterRole of
// manifests/base (which therefore must allow the token and access reviews).
package metrics

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	"github.com/trainyard/trainyard/pkg/controller/trainjob"
	"github.com/trainyard/trainyard/pkg/metrics/serving"
	"github.com/trainyard/trainyard/pkg/reviewlimit"
	"github.com/trainyard/trainyard/test/integration/framework"
)

// clusterRole reads a ClusterRole of manifests/base/rbac.
func clusterRole(t *testing.T, file string) *rbacv1.ClusterRole {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "manifests", "base", "rbac", file))
	if err != nil {
		t.Fatal(err)
	}
	var cr rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(b, &cr); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return &cr
}

// freeAddress returns a loopback address with a port that was free a moment ago.
func freeAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// fixture is a manager serving its metrics as cmd/trainyard-manager
// configures them, under its ServiceAccount with manifests/base's
// ClusterRole, and the tokens of three ServiceAccounts.
type fixture struct {
	env    *framework.Env
	cs     *kubernetes.Clientset
	ns     string
	addr   string
	tokens map[string]string
	hc     *http.Client
}

// scrape GETs /metrics with token ("" none) and returns the status and body.
func (f *fixture) scrape(scheme, token string) (int, string, error) {
	return f.scrapeWith(f.hc, scheme, token)
}

func (f *fixture) scrapeWith(hc *http.Client, scheme, token string) (int, string, error) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, scheme+"://"+f.addr+"/metrics", nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// token asks for a new token of ServiceAccount sa.
func (f *fixture) token(t *testing.T, sa string) string {
	t.Helper()
	tr, err := f.cs.CoreV1().ServiceAccounts(f.ns).CreateToken(context.Background(), sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s: %v", sa, err)
	}
	return tr.Status.Token
}

func startMetrics(t *testing.T) *fixture {
	t.Helper()
	return startMetricsWith(t, nil, true)
}

// startMetricsWith starts the fixture with limits (nil: the manager's), and
// Trainyard's TrainJob metrics in controller-runtime's registry when
// trainJobMetrics (once per test binary: the registry is global).
func startMetricsWith(t *testing.T, limits *reviewlimit.Limits, trainJobMetrics bool) *fixture {
	t.Helper()
	env, err := framework.Start()
	if err != nil {
		t.Fatalf("starting the API server: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping the API server: %v", err)
		}
	})
	ctx := context.Background()
	c := env.Client
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ns := framework.NewNamespace(t, c, "metrics")

	// The manager's ClusterRole and the metrics reader, as manifests/base
	// ships them, and three ServiceAccounts: the manager's, a scraper bound to
	// the reader, and one bound to nothing.
	managerRole, readerRole := clusterRole(t, "role.yaml"), clusterRole(t, "metrics_reader_role.yaml")
	bind := func(sa string, role *rbacv1.ClusterRole) *rbacv1.ClusterRoleBinding {
		return &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: role.Name + "-" + sa},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}},
		}
	}
	for _, o := range []client.Object{
		managerRole, readerRole, bind("trainyard-manager", managerRole), bind("scraper", readerRole),
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("creating %s: %v", o.GetName(), err)
		}
	}
	f := &fixture{env: env, cs: cs, ns: ns, tokens: map[string]string{}}
	for _, sa := range []string{"trainyard-manager", "scraper", "stranger"} {
		if err := c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}}); err != nil {
			t.Fatal(err)
		}
		f.tokens[sa] = f.token(t, sa)
	}

	// The manager, as cmd/trainyard-manager configures its metrics, with its
	// ServiceAccount's token instead of the test's admin certificate.
	cfg := rest.AnonymousClientConfig(env.Config)
	cfg.BearerToken = f.tokens["trainyard-manager"]
	addr := freeAddress(t)
	f.addr = addr
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 env.Scheme,
		Metrics:                serving.Config{BindAddress: addr, Secure: true, Limits: limits}.Options(),
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	// The endpoint serves controller-runtime's registry, where the manager
	// registers its kinds' metrics (this test runs one manager).
	if trainJobMetrics {
		if err := trainjob.NewMetrics(mgr.GetClient()).Register(crmetrics.Registry); err != nil {
			t.Fatal(err)
		}
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

	// The certificate is self-signed: the client cannot verify it, which is
	// not what this test is about.
	f.hc = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	framework.Eventually(t, func() error {
		_, _, err := f.scrape("https", "")
		return err
	})
	return f
}

func TestSecureMetrics(t *testing.T) {
	f := startMetrics(t)
	tokens, scrape, addr := f.tokens, f.scrape, f.addr

	type result struct {
		Status int
		// Metrics: the body holds Trainyard's metrics, the by-phase gauge read
		// through the manager's cache among them.
		Metrics bool
	}
	for _, tc := range []struct {
		name, token string
		want        result
	}{
		{"no token", "", result{Status: http.StatusUnauthorized}},
		{"a token the API server did not issue", "not-a-token", result{Status: http.StatusUnauthorized}},
		{"a ServiceAccount bound to trainyard-metrics-reader", tokens["scraper"], result{Status: http.StatusOK, Metrics: true}},
		{"a ServiceAccount bound to nothing", tokens["stranger"], result{Status: http.StatusForbidden}},
		{"the manager's ServiceAccount, not a reader", tokens["trainyard-manager"], result{Status: http.StatusForbidden}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body, err := scrape("https", tc.token)
			if err != nil {
				t.Fatal(err)
			}
			got := result{Status: status, Metrics: strings.Contains(body, "trainyard_trainjob_time_to_jobset_seconds") && strings.Contains(body, `trainyard_trainjobs{phase="Running"}`)}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("GET /metrics (-want +got):\n%s\nbody: %.500s", diff, body)
			}
		})
	}

	// Plain HTTP reaches nothing: Go's TLS server answers it with 400.
	if status, _, err := scrape("http", tokens["scraper"]); err == nil && status == http.StatusOK {
		t.Errorf("GET http://%s/metrics: %d, want it refused", addr, status)
	}
}
