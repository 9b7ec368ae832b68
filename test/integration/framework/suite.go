package framework

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Main is a suite's TestMain: it starts an Env with opts into *env, runs
// setup (nil for none; the undo it returns, if any, runs before the Env
// stops), runs the tests, stops the Env and exits with the tests' code.
func Main(m *testing.M, env **Env, opts Options, setup func(*Env) (undo func(), err error)) {
	os.Exit(runSuite(m, env, opts, setup))
}

func runSuite(m *testing.M, env **Env, opts Options, setup func(*Env) (func(), error)) int {
	e, err := Start(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration environment:", err)
		return 1
	}
	*env = e
	defer func() {
		if err := e.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping integration environment:", err)
		}
	}()
	if setup != nil {
		undo, err := setup(e)
		if err != nil {
			fmt.Fprintln(os.Stderr, "suite setup:", err)
			return 1
		}
		if undo != nil {
			defer undo()
		}
	}
	return m.Run()
}

// WithManager is a Main setup that runs Trainyard's manager with opts for the
// whole suite.
func WithManager(opts ManagerOptions) func(*Env) (func(), error) {
	return func(e *Env) (func(), error) { return nil, e.StartManager(opts) }
}

// TestManagerOptions are o with what every manager a test starts shares: no metrics or
// health listener, and controller names that may repeat, since one test
// process starts and stops several managers.
func TestManagerOptions(o ctrl.Options) ctrl.Options {
	o.Metrics = metricsserver.Options{BindAddress: "0"}
	o.HealthProbeBindAddress = "0"
	o.Controller = config.Controller{SkipNameValidation: ptr.To(true)}
	return o
}

// RunManager starts mgr in the background and returns what stops it and waits
// until it has stopped; what names it in the log.
func RunManager(mgr manager.Manager, what string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, what+" stopped with error:", err)
		}
	}()
	return func() { cancel(); <-done }
}

// waitWebhookServer waits until mgr's webhook server answers: admission
// fails closed, so nothing may be created before.
func waitWebhookServer(mgr manager.Manager, what string) error {
	deadline := time.Now().Add(Timeout)
	for mgr.GetWebhookServer().StartedChecker()(nil) != nil {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not start within %s", what, Timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}
