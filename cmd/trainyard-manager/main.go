// Command trainyard-manager runs Trainyard's controllers: it turns TrainJobs into
// JobSets and reports their progress.
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/controller"
	"github.com/trainyard/trainyard/pkg/runtime/plugins"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "trainyard-manager:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		metricsAddr = flag.String("metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint; 0 disables it")
		probeAddr   = flag.String("health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints")
		leaderElect = flag.Bool("leader-elect", false, "elect a leader, so that only one of several replicas reconciles")
		leaderNS    = flag.String("leader-election-namespace", "", "namespace of the leader-election Lease (default: the pod's namespace)")
		concurrency = flag.Int("trainjob-concurrency", 5, "TrainJobs reconciled in parallel")
		qps         = flag.Float64("kube-api-qps", 50, "client requests per second to the API server")
		burst       = flag.Int("kube-api-burst", 100, "client burst of requests to the API server")
	)
	zopts := zap.Options{}
	zopts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zopts)))
	log := ctrl.Log.WithName("setup")

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(trainer.AddToScheme(scheme))
	utilruntime.Must(jobsetv1alpha2.AddToScheme(scheme))

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(*qps), *burst

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: *metricsAddr},
		HealthProbeBindAddress:  *probeAddr,
		LeaderElection:          *leaderElect,
		LeaderElectionID:        "trainyard.trainer.kubeflow.org",
		LeaderElectionNamespace: *leaderNS,
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	fw, err := plugins.NewFramework()
	if err != nil {
		return fmt.Errorf("registering plugins: %w", err)
	}
	log.Info("Runtime plugins", "order", fw.Names())
	if err := controller.SetupWithManager(mgr, fw, controller.Options{MaxConcurrentReconciles: *concurrency}); err != nil {
		return fmt.Errorf("setting up the TrainJob controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	log.Info("Starting manager")
	return mgr.Start(ctrl.SetupSignalHandler())
}
