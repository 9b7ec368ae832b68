// Package framework starts what the integration tests run against: a real etcd
// and kube-apiserver (built from Go modules into bin/k8s by `make k8s-tools`),
// Trainyard's and JobSet's CRDs, kube-controller-manager running only the garbage
// collector (so that ownerReference cascades really happen) and the ClusterRole
// aggregation (so that roles labelled aggregate-to-edit really reach `edit`),
// and Trainyard's manager in-process, which a test can stop and start again.
package framework

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zapcore"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueueapi "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/controller"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
	"github.com/trainyard/trainyard/pkg/controller/pytorchjob"
	"github.com/trainyard/trainyard/pkg/controller/trainjob"
	rtframework "github.com/trainyard/trainyard/pkg/runtime/framework"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/kueue"
)

// Timeouts for Eventually-style waits.
const (
	Timeout  = 20 * time.Second
	Interval = 100 * time.Millisecond
)

// Env is a running test control plane.
type Env struct {
	Config *rest.Config
	Client client.Client
	Scheme *k8sruntime.Scheme
	// Manager is the manager StartManager last started (its Metrics are
	// that manager's registry).
	Manager *jobframework.Manager
	// Metrics is the registry of that manager's metrics.
	Metrics *prometheus.Registry

	env      *envtest.Environment
	webhooks bool
	// ExtraPlugins are the test-only plugins of every manager StartManager
	// runs, unless its options name others.
	ExtraPlugins []rtframework.Plugin
	gc           *exec.Cmd
	gcDone       chan struct{}
	tmpDir       string
	mu           sync.Mutex
	stopMgr      func()
	stopJobSet   func()
}

// RepoRoot is the repository's top directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// Scheme knows Kubernetes, Trainyard (TrainJob and the legacy PyTorchJob),
// JobSet and Kueue types. The PyTorchJob CRD is installed with the others
// (manifests/base/crds), so the webhooks suite serves its webhooks.
func Scheme() *k8sruntime.Scheme {
	s := k8sruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(trainer.AddToScheme(s))
	utilruntime.Must(kubeflowv1.AddToScheme(s))
	utilruntime.Must(jobsetv1alpha2.AddToScheme(s))
	utilruntime.Must(kueueapi.AddToScheme(s))
	return s
}

func moduleDir(mod string) (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", mod).Output()
	if err != nil {
		return "", fmt.Errorf("locating module %s: %w", mod, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Options choose what Start brings up.
type Options struct {
	// Webhooks installs Trainyard's webhook configurations (manifests/base/webhook)
	// pointing at the in-process manager, which then serves them.
	Webhooks bool
	// CRDPaths are more CRD files or directories to install (a scheduler's
	// PodGroup, ...).
	CRDPaths []string
	// JobSetWebhooks runs JobSet's own webhooks for JobSets (defaulting, and
	// the validation that keeps a suspended JobSet's template immutable but
	// for what Kueue changes), as a cluster with JobSet installed has them.
	// Needs Webhooks (for the serving certificate).
	JobSetWebhooks bool
	// NodeAuthorization runs the API server as a cluster does for its
	// kubelets: the Node authorizer before RBAC and the NodeRestriction
	// admission plugin.
	NodeAuthorization bool
}

// Start brings up etcd, kube-apiserver with the CRDs, the garbage collector and
// the ClusterRole aggregation.
func Start(opts ...Options) (*Env, error) {
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(zapLevel())))
	root := RepoRoot()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(root, "bin", "k8s")
	}
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(assets, b)); err != nil {
			return nil, fmt.Errorf("%s not found in %s: run `make k8s-tools` first", b, assets)
		}
	}
	jobsetDir, err := moduleDir("sigs.k8s.io/jobset")
	if err != nil {
		return nil, err
	}
	kueueDir, err := moduleDir("sigs.k8s.io/kueue")
	if err != nil {
		return nil, err
	}
	e := &Env{Scheme: Scheme()}
	e.env = &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths: []string{
			filepath.Join(root, "manifests", "base", "crds"),
			filepath.Join(jobsetDir, "config", "components", "crd", "bases"),
			// Kueue's CRDs without their conversion webhook: tests use only the
			// storage version, v1beta2.
			filepath.Join(kueueDir, "config", "components", "crd", "bases"),
		},
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: time.Minute,
	}
	e.env.CRDDirectoryPaths = append(e.env.CRDDirectoryPaths, o.CRDPaths...)
	if o.Webhooks {
		e.webhooks = true
		e.env.WebhookInstallOptions = envtest.WebhookInstallOptions{
			Paths:            []string{filepath.Join(root, "manifests", "base", "webhook")},
			LocalServingHost: "127.0.0.1",
		}
	}
	if o.NodeAuthorization {
		e.env.ControlPlane.GetAPIServer().Configure().
			Set("authorization-mode", "Node,RBAC").
			Append("enable-admission-plugins", "NodeRestriction")
	}
	if e.Config, err = e.env.Start(); err != nil {
		return nil, fmt.Errorf("starting kube-apiserver and etcd: %w", err)
	}
	if e.Client, err = client.New(e.Config, client.Options{Scheme: e.Scheme}); err != nil {
		return nil, e.stopWith(err)
	}
	if err := e.startGC(assets); err != nil {
		return nil, e.stopWith(err)
	}
	if o.JobSetWebhooks {
		if !o.Webhooks {
			return nil, e.stopWith(fmt.Errorf("JobSetWebhooks needs Webhooks"))
		}
		if err := e.startJobSetWebhooks(jobsetDir); err != nil {
			return nil, e.stopWith(err)
		}
	}
	return e, nil
}

func zapLevel() zapcore.Level {
	if os.Getenv("TEST_VERBOSE") != "" {
		return -2
	}
	return 4 // errors only: keep test output readable
}

// startGC runs kube-controller-manager with only the garbage collector and the
// clusterrole-aggregation controller, which fills the rules of ClusterRoles
// with an aggregationRule (the built-in admin, edit and view) from the roles
// their selectors match; without it those roles grant nothing on Trainyard's
// kinds however they are labelled.
func (e *Env) startGC(assets string) error {
	bin := filepath.Join(assets, "kube-controller-manager")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("kube-controller-manager not found in %s: run `make k8s-tools` first", assets)
	}
	user, err := e.env.AddUser(envtest.User{Name: "gc", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("adding garbage-collector user: %w", err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return err
	}
	if e.tmpDir, err = os.MkdirTemp("", "trainyard-it-"); err != nil {
		return err
	}
	kcPath := filepath.Join(e.tmpDir, "gc.kubeconfig")
	if err := os.WriteFile(kcPath, kc, 0o600); err != nil {
		return err
	}
	log, err := os.Create(filepath.Join(e.tmpDir, "kube-controller-manager.log"))
	if err != nil {
		return err
	}
	e.gc = exec.Command(bin, "--kubeconfig="+kcPath, "--controllers=garbagecollector,clusterrole-aggregation-controller", "--leader-elect=false",
		"--secure-port=0", "--use-service-account-credentials=false", "--v=1")
	e.gc.Stdout, e.gc.Stderr = log, log
	if err := e.gc.Start(); err != nil {
		return fmt.Errorf("starting kube-controller-manager: %w", err)
	}
	e.gcDone = make(chan struct{})
	go func() { _ = e.gc.Wait(); close(e.gcDone) }()
	return nil
}

// ManagerOptions change how StartManager runs Trainyard.
type ManagerOptions struct {
	Clock     clock.PassiveClock
	KueueMode kueue.Mode
	// ExtraPlugins run after Trainyard's own (test-only plugins); nil means
	// the Env's ExtraPlugins.
	ExtraPlugins []rtframework.Plugin
	// ExtraKinds are job kinds beyond Trainyard's own (test-only kinds),
	// set up after them.
	ExtraKinds []jobframework.Kind
	// Kinds, when set, changes Trainyard's own kinds (the TrainJob kind's
	// options are the test's) before the manager is set up: to disable one,
	// or set its flags.
	Kinds func([]jobframework.Kind)
}

// StartManager runs Trainyard's manager in-process until StopManager or Stop.
func (e *Env) StartManager(opts ManagerOptions) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopMgr != nil {
		return fmt.Errorf("manager already running")
	}
	if opts.ExtraPlugins == nil {
		opts.ExtraPlugins = e.ExtraPlugins
	}
	kinds := controller.Kinds()
	for _, k := range kinds {
		switch k := k.(type) {
		case *trainjob.Kind:
			k.Options = jobframework.Options{MaxConcurrentReconciles: 4, Clock: opts.Clock}
			k.Plugins.KueueMode = opts.KueueMode
			k.ExtraPlugins = opts.ExtraPlugins
		case *pytorchjob.Kind:
			k.MaxConcurrentReconciles, k.Clock = 4, opts.Clock
		}
	}
	if opts.Kinds != nil {
		opts.Kinds(kinds)
	}
	kinds = append(kinds, opts.ExtraKinds...)
	if err := jobframework.AddToScheme(e.Scheme, kinds); err != nil {
		return err
	}
	cacheOpts, err := controller.CacheOptionsFor(e.Config, e.Scheme, append(jobframework.Owned(kinds), extraOwned(opts.ExtraPlugins)...), jobframework.JobObjects(kinds)...)
	if err != nil {
		return err
	}
	mgrOpts := TestManagerOptions(ctrl.Options{Scheme: e.Scheme, Cache: cacheOpts, Client: controller.ClientOptions()})
	if e.webhooks {
		wo := e.env.WebhookInstallOptions
		mgrOpts.WebhookServer = webhook.NewServer(webhook.Options{Host: wo.LocalServingHost, Port: wo.LocalServingPort, CertDir: wo.LocalServingCertDir})
	}
	mgr, err := ctrl.NewManager(e.Config, mgrOpts)
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	// Each manager has its own registry: nothing is shared across the
	// managers a test starts and stops.
	reg := prometheus.NewRegistry()
	m := jobframework.NewManager(mgr, reg)
	if e.webhooks {
		if err := jobframework.SetupWebhooks(m, kinds); err != nil {
			return fmt.Errorf("registering webhooks: %w", err)
		}
	}
	if err := jobframework.SetupControllers(m, kinds); err != nil {
		return err
	}
	e.Manager, e.Metrics = m, reg
	e.stopMgr = RunManager(mgr, "manager")
	if e.webhooks {
		return waitWebhookServer(mgr, "webhook server")
	}
	return nil
}

// StopManager stops the manager and waits until it has stopped.
func (e *Env) StopManager() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopMgr == nil {
		return
	}
	e.stopMgr()
	e.stopMgr = nil
}

// Stop tears everything down.
func (e *Env) Stop() error { return e.stopWith(nil) }

func (e *Env) stopWith(cause error) error {
	e.StopManager()
	if e.stopJobSet != nil {
		e.stopJobSet()
	}
	if e.gc != nil && e.gc.Process != nil {
		_ = e.gc.Process.Kill()
		<-e.gcDone
	}
	if e.tmpDir != "" {
		_ = os.RemoveAll(e.tmpDir)
	}
	if err := e.env.Stop(); err != nil && cause == nil {
		return err
	}
	return cause
}

// KubeConfig returns an admin kubeconfig for the test API server.
func (e *Env) KubeConfig() ([]byte, error) {
	user, err := e.env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, err
	}
	return user.KubeConfig()
}

// extraOwned lists the child kinds test-only plugins emit.
func extraOwned(ps []rtframework.Plugin) []client.Object {
	var out []client.Object
	for _, p := range ps {
		if o, ok := p.(rtframework.OwnerPlugin); ok {
			out = append(out, o.Owns()...)
		}
	}
	return out
}

// WebhookAddress is host:port of the manager's webhook server (Options.Webhooks),
// for tests that call it directly, as any pod that reaches the port can.
func (e *Env) WebhookAddress() string {
	wo := e.env.WebhookInstallOptions
	return net.JoinHostPort(wo.LocalServingHost, strconv.Itoa(wo.LocalServingPort))
}

// UserConfig is a client configuration of user name in groups (a client
// certificate of the test API server's CA).
func (e *Env) UserConfig(name string, groups ...string) (*rest.Config, error) {
	u, err := e.env.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return nil, err
	}
	return u.Config(), nil
}
