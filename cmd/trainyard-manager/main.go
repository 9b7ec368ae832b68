// Command trainyard-manager runs Trainyard's controllers: it turns TrainJobs into
// JobSets and reports their progress.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	kueueapi "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/trainyard/trainyard/pkg/controller"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
	"github.com/trainyard/trainyard/pkg/metrics"
	"github.com/trainyard/trainyard/pkg/metrics/serving"
	rtpkg "github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/version"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "trainyard-manager:", err)
		os.Exit(1)
	}
}

// defaultGCPercent is the manager's GOGC unless the environment sets one.
// Its heap is mostly its cache, which grows with the jobs: collecting at 50%
// growth instead of Go's 100% keeps the peak RSS under a burst of 1000 jobs
// about 10% lower (67 -> 60 MiB) for about 15% more manager CPU (0.3 s per
// 1000 jobs); docs/performance.md has the runs.
const defaultGCPercent = 50

func run() error {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(defaultGCPercent)
	}
	var (
		metricsCfg  = serving.Config{}
		probeAddr   = flag.String("health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints")
		pprofAddr   = flag.String("pprof-bind-address", "", "address of Go's /debug/pprof endpoints, for profiling (plain HTTP, unauthenticated: bind it to localhost; empty: off)")
		leaderElect = flag.Bool("leader-elect", false, "elect a leader, so that only one of several replicas reconciles")
		leaderNS    = flag.String("leader-election-namespace", "", "namespace of the leader-election Lease (default: the pod's namespace)")
		qps         = flag.Float64("kube-api-qps", 500, "client requests per second to the API server")
		burst       = flag.Int("kube-api-burst", 1000, "client burst of requests to the API server")
		webhookPort = flag.Int("webhook-port", 9443, "port of the admission webhook server")
		webhookHost = flag.String("webhook-host", "", "address the webhook server binds to (default: all)")
		domain      = flag.String("cluster-domain", rtpkg.DefaultClusterDomain, "the cluster's DNS domain (the kubelets' --cluster-domain): elastic torch TrainJobs rendezvous at node 0's fully qualified name, <pod host>.<subdomain>.<namespace>.svc.<domain>")
		showVersion = version.RegisterFlag(flag.CommandLine)
		wh          = webhookOptions{}
		status      = statusOptions{}
		leader      = leaderOptions{}
		memory      = memoryOptions{}
	)
	// Each job kind's own settings (--trainjob-concurrency, --kueue-mode,
	// --enable-pytorchjob, --gang-scheduler-name, ...).
	kinds := controller.Kinds()
	jobframework.BindFlags(flag.CommandLine, kinds)
	flag.StringVar(&metricsCfg.BindAddress, "metrics-bind-address", "", "address of the Prometheus metrics endpoint (default "+serving.DefaultSecureAddress+", or "+serving.DefaultPlainAddress+" with --metrics-secure=false); 0 disables it")
	flag.BoolVar(&metricsCfg.Secure, "metrics-secure", true, "serve metrics over HTTPS, only to clients whose bearer token the API server authenticates and authorizes for GET /metrics (ClusterRole trainyard-metrics-reader); false: plain HTTP to anyone")
	flag.StringVar(&metricsCfg.CertDir, "metrics-cert-dir", "", "directory of tls.crt and tls.key for the metrics endpoint (default: a self-signed certificate made at start)")
	flag.BoolVar(&wh.enabled, "enable-webhooks", true, "serve the admission webhooks")
	flag.StringVar(&wh.certManagement, "cert-management", "internal", "where the webhook serving certificate comes from: internal (created and rotated by Trainyard) or external (mounted, e.g. by cert-manager)")
	flag.StringVar(&wh.namespace, "namespace", os.Getenv("POD_NAMESPACE"), "namespace of the manager (for the webhook certificate Secret)")
	flag.StringVar(&wh.serviceName, "webhook-service-name", "trainyard-webhook", "Service in front of the webhook server")
	flag.StringVar(&wh.secretName, "webhook-secret-name", "trainyard-webhook-cert", "Secret holding the webhook serving certificate")
	flag.StringVar(&wh.certDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "directory of tls.crt and tls.key for the webhook server")
	status.bindFlags(flag.CommandLine)
	leader.bindFlags(flag.CommandLine)
	memory.bindFlags(flag.CommandLine)
	zopts := zap.Options{}
	zopts.BindFlags(flag.CommandLine)
	flag.Parse()
	if showVersion.Handled(os.Stdout) {
		return nil
	}
	if err := jobframework.Validate(kinds); err != nil {
		return err
	}
	build := version.Get()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zopts)))
	log := ctrl.Log.WithName("setup")
	log.Info("Trainyard manager", "version", build.Version, "gitCommit", build.GitCommit, "buildDate", build.BuildDate, "goVersion", build.GoVersion)
	soft, err := memory.apply()
	if err != nil {
		return err
	}
	if soft > 0 {
		log.Info("Go heap soft limit", "bytes", soft, "memoryLimit", memory.limit)
	}

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(kueueapi.AddToScheme(scheme))
	if err := jobframework.AddToScheme(scheme, kinds); err != nil {
		return err
	}
	if errs := validation.IsDNS1123Subdomain(*domain); len(errs) > 0 {
		return fmt.Errorf("--cluster-domain %q: %s", *domain, strings.Join(errs, "; "))
	}
	wh.clusterDomain = *domain
	if err := metricsCfg.Validate(); err != nil {
		return err
	}

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(*qps), *burst

	// ConfigMaps: the status server's CA publisher reads its own, which the
	// cache must select by label as it does the plugins' children.
	cacheOpts, err := controller.CacheOptions(cfg, scheme, &corev1.ConfigMap{})
	if err != nil {
		return err
	}
	mgrOpts := ctrl.Options{
		Scheme:                  scheme,
		Cache:                   cacheOpts,
		Client:                  controller.ClientOptions(),
		Metrics:                 metricsCfg.Options(),
		HealthProbeBindAddress:  *probeAddr,
		PprofBindAddress:        *pprofAddr,
		LeaderElection:          *leaderElect,
		LeaderElectionID:        leaderElectionID,
		LeaderElectionNamespace: *leaderNS,
		WebhookServer:           webhook.NewServer(webhook.Options{Host: *webhookHost, Port: *webhookPort, CertDir: wh.certDir}),
	}
	if err := leader.apply(&mgrOpts); err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	statusURL, err := setupStatusServer(mgr, status, wh)
	if err != nil {
		return err
	}
	// The manager's endpoint serves controller-runtime's registry.
	m := jobframework.NewManager(mgr, crmetrics.Registry)
	m.ClusterDomain, m.StatusServerURL = *domain, statusURL
	if err := metrics.RegisterBuildInfo(m.Metrics); err != nil {
		return err
	}
	if err := jobframework.SetupControllers(m, kinds); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	webhooksReady, err := setupWebhooks(m, kinds, wh)
	if err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", webhooksReady); err != nil {
		return err
	}
	if *leaderElect && wh.enabled {
		if err := addLeaseOwner(mgr, leaseNamespace(*leaderNS), types.NamespacedName{Namespace: wh.namespace, Name: wh.serviceName}); err != nil {
			return err
		}
	}
	log.Info("Starting manager")
	return mgr.Start(ctrl.SetupSignalHandler())
}
