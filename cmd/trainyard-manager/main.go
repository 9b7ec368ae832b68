// Command trainyard-manager runs Trainyard's controllers: it turns TrainJobs into
// JobSets and reports their progress.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueueapi "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/controller"
	"github.com/trainyard/trainyard/pkg/controller/pytorchjobcontroller"
	legacy "github.com/trainyard/trainyard/pkg/legacy/pytorchjob"
	"github.com/trainyard/trainyard/pkg/metrics"
	"github.com/trainyard/trainyard/pkg/metrics/serving"
	rtpkg "github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/plugins"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/kueue"
	"github.com/trainyard/trainyard/pkg/version"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "trainyard-manager:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		metricsCfg  = serving.Config{}
		probeAddr   = flag.String("health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints")
		pprofAddr   = flag.String("pprof-bind-address", "", "address of Go's /debug/pprof endpoints, for profiling (plain HTTP, unauthenticated: bind it to localhost; empty: off)")
		leaderElect = flag.Bool("leader-elect", false, "elect a leader, so that only one of several replicas reconciles")
		leaderNS    = flag.String("leader-election-namespace", "", "namespace of the leader-election Lease (default: the pod's namespace)")
		concurrency = flag.Int("trainjob-concurrency", 20, "TrainJobs reconciled in parallel")
		statusDelay = flag.Duration("status-write-delay", time.Second, "how long a TrainJob's change of phase, reason or condition may wait to be written with the next changes (0: each at once)")
		countsDelay = flag.Duration("counts-write-delay", 10*time.Second, "how long a TrainJob's change of counts only (the JobSet's job counts, the message that counts nodes) may wait to be written; any other change carries it earlier")
		qps         = flag.Float64("kube-api-qps", 500, "client requests per second to the API server")
		burst       = flag.Int("kube-api-burst", 1000, "client burst of requests to the API server")
		webhookPort = flag.Int("webhook-port", 9443, "port of the admission webhook server")
		webhookHost = flag.String("webhook-host", "", "address the webhook server binds to (default: all)")
		kueueMode   = flag.String("kueue-mode", string(kueue.ModeTrainJob), "how Kueue queues TrainJobs: trainjob (Kueue's TrainJob integration is enabled) or jobset (it is not; Trainyard hands each queued TrainJob's JobSet to Kueue)")
		domain      = flag.String("cluster-domain", rtpkg.DefaultClusterDomain, "the cluster's DNS domain (the kubelets' --cluster-domain): elastic torch TrainJobs rendezvous at node 0's fully qualified name, <pod host>.<subdomain>.<namespace>.svc.<domain>")
		gangSched   = flag.String("gang-scheduler-name", "", "gang scheduler of legacy PyTorchJobs, as v1's flag: volcano or scheduler-plugins (their pods get a PodGroup shaped by runPolicy.schedulingPolicy); empty: none")
		pytorchJobs = flag.Bool("enable-pytorchjob", true, "run legacy kubeflow.org/v1 PyTorchJobs (needs the pytorchjobs.kubeflow.org CRD)")
		showVersion = version.RegisterFlag(flag.CommandLine)
		wh          = webhookOptions{}
		status      = statusOptions{}
		leader      = leaderOptions{}
		memory      = memoryOptions{}
	)
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
	utilruntime.Must(trainer.AddToScheme(scheme))
	utilruntime.Must(kubeflowv1.AddToScheme(scheme))
	utilruntime.Must(jobsetv1alpha2.AddToScheme(scheme))
	utilruntime.Must(kueueapi.AddToScheme(scheme))
	mode, err := kueue.ParseMode(*kueueMode)
	if err != nil {
		return err
	}
	gs, err := legacy.ParseGangScheduler(*gangSched)
	if err != nil {
		return fmt.Errorf("--gang-scheduler-name: %w", err)
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

	cacheOpts, err := controller.CacheOptions(cfg, scheme)
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
		LeaderElectionID:        "trainyard.trainer.kubeflow.org",
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
	progressCfg, err := setupStatusServer(mgr, status, wh)
	if err != nil {
		return err
	}
	fw, err := plugins.NewFramework(plugins.Options{KueueMode: mode, ClusterDomain: *domain, Progress: progressCfg})
	if err != nil {
		return fmt.Errorf("registering plugins: %w", err)
	}
	log.Info("Runtime plugins", "order", fw.Names())
	metrics.Register(mgr.GetClient())
	if err := controller.SetupWithManager(mgr, fw, controller.Options{MaxConcurrentReconciles: *concurrency,
		Delays: controller.Delays{StatusDelay: *statusDelay, CountsDelay: *countsDelay}}); err != nil {
		return fmt.Errorf("setting up the TrainJob controller: %w", err)
	}
	if *pytorchJobs {
		if err := pytorchjobcontroller.SetupWithManager(mgr, pytorchjobcontroller.Options{MaxConcurrentReconciles: *concurrency, GangScheduler: gs}); err != nil {
			return fmt.Errorf("setting up the PyTorchJob controller: %w", err)
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	webhooksReady, err := setupWebhooks(mgr, fw, wh)
	if err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", webhooksReady); err != nil {
		return err
	}
	log.Info("Starting manager")
	return mgr.Start(ctrl.SetupSignalHandler())
}
