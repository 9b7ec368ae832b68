package localcluster

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// The coscheduling gang scheduler (Options.GangScheduler): the kube-scheduler of
// sigs.k8s.io/scheduler-plugins with the Coscheduling plugin, and its controller
// manager, whose PodGroup controller keeps each PodGroup's phase and pod counts.
//
// It runs as a second scheduler beside kube-scheduler, as scheduler-plugins
// documents its install: only pods whose spec.schedulerName is
// CoschedulingSchedulerName (set by the runtime's pod template) are gang
// scheduled, every other pod keeps the default scheduler, and the cluster's
// kube-scheduler stays the one the rest of the suite is tested with.
const (
	// CoschedulingScheduler and CoschedulingController are the component (and
	// binary) names.
	CoschedulingScheduler  = "scheduler-plugins-scheduler"
	CoschedulingController = "scheduler-plugins-controller"
	// CoschedulingSchedulerName is the scheduler's profile: the schedulerName a
	// runtime gives its pods.
	CoschedulingSchedulerName = "scheduler-plugins-scheduler"
	// CoschedulingPermitWaitingTimeSeconds is the plugin's wait at Permit for a
	// PodGroup without scheduleTimeoutSeconds (the plugin's own default).
	CoschedulingPermitWaitingTimeSeconds = 60
	// CoschedulingPodGroupRejectPercentage is the plugin's default: when a pod
	// of a group does not fit and at most this share of the group is still
	// unplaced, the placed pods keep waiting at Permit (until the group's
	// scheduleTimeoutSeconds) instead of being rejected at once.
	CoschedulingPodGroupRejectPercentage = 10
	// CoschedulingRetryUnschedulable is how long a pod the scheduler found
	// unschedulable waits at most before it is tried again. A gang that
	// Coscheduling rejected (at Permit, or after its timeout) is retried only on
	// the events that plugin registers, a pod or PodGroup added (v0.34): not when
	// a node joins or a pod goes. Otherwise it waits for kube-scheduler's
	// periodic flush, 5 minutes by default (--pod-max-in-unschedulable-pods-duration,
	// deprecated but still served in 1.34); the local cluster shortens it so that
	// added capacity is used within seconds.
	CoschedulingRetryUnschedulable = 20 * time.Second
)

const schedulerPluginsModule = "sigs.k8s.io/scheduler-plugins"

func (c *Cluster) coschedulingConfig() string {
	return filepath.Join(c.o.StateDir, "config", "coscheduling-scheduler.yaml")
}

// coschedulingBinaries are the gang scheduler's binaries (test/tools/build.sh
// targets of the same names).
func coschedulingBinaries(o Options) []string {
	return []string{filepath.Join(o.BinDir, CoschedulingScheduler), filepath.Join(o.BinDir, CoschedulingController)}
}

// prepareCoscheduling adds the PodGroup and ElasticQuota CRDs of the module
// the binaries are built from to the cluster's CRDs (the controller manager
// runs a controller for each, and fails without either CRD) and writes the
// scheduler's configuration.
func (c *Cluster) prepareCoscheduling(ctx context.Context) error {
	dir, err := moduleDir(ctx, c.bin(CoschedulingScheduler), schedulerPluginsModule)
	if err != nil {
		return err
	}
	crds, err := readYAMLFiles(filepath.Join(dir, "config", "crd", "bases"))
	if err != nil {
		return fmt.Errorf("scheduler-plugins CRDs: %w", err)
	}
	c.crds = append(c.crds, crds...)
	// The upstream configuration (manifests/coscheduling/scheduler-config.yaml),
	// as a profile of its own: Coscheduling at every extension point it
	// implements, and its queue sort, which keeps a group's pods together in
	// the queue, instead of the default one.
	cfg := map[string]any{
		"apiVersion":       "kubescheduler.config.k8s.io/v1",
		"kind":             "KubeSchedulerConfiguration",
		"leaderElection":   map[string]any{"leaderElect": false},
		"clientConnection": c.schedulerClientConnection(),
		"profiles": []any{map[string]any{
			"schedulerName": CoschedulingSchedulerName,
			"plugins": map[string]any{
				"multiPoint": map[string]any{"enabled": []any{map[string]any{"name": "Coscheduling"}}},
				"queueSort": map[string]any{
					"enabled":  []any{map[string]any{"name": "Coscheduling"}},
					"disabled": []any{map[string]any{"name": "*"}},
				},
			},
			"pluginConfig": []any{map[string]any{
				"name": "Coscheduling",
				"args": map[string]any{
					"permitWaitingTimeSeconds": CoschedulingPermitWaitingTimeSeconds,
					"podGroupRejectPercentage": CoschedulingPodGroupRejectPercentage,
				},
			}},
		}},
	}
	return writeJSON(c.coschedulingConfig(), cfg)
}

// schedulerClientConnection is a scheduler configuration's clientConnection:
// the admin kubeconfig, and lifted rate limits with Options.DisableQPSLimits.
func (c *Cluster) schedulerClientConnection() map[string]any {
	cc := map[string]any{"kubeconfig": c.Kubeconfig()}
	if c.o.DisableQPSLimits {
		cc["qps"], cc["burst"] = 5000, 10000
	}
	return cc
}

// startCoscheduling starts the scheduler and the controller manager (the CRDs
// are established) and waits until both are healthy.
func (c *Cluster) startCoscheduling(ctx context.Context) error {
	sched, err := c.sup.start(CoschedulingScheduler, []string{c.bin(CoschedulingScheduler),
		"--config=" + c.coschedulingConfig(),
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", c.ports.CoschedulingScheduler),
		"--tls-cert-file=" + c.pki.servingCert(), "--tls-private-key-file=" + c.pki.servingKey(),
		"--cert-dir=" + filepath.Join(c.o.StateDir, "certs", CoschedulingScheduler),
		"--profiling=false",
		"--pod-max-in-unschedulable-pods-duration=" + CoschedulingRetryUnschedulable.String(),
	}, false)
	if err != nil {
		return err
	}
	args := []string{c.bin(CoschedulingController),
		"--kubeconfig=" + c.Kubeconfig(),
		"--metricsAddr=0", // none
		"--probeAddr=" + loopback(c.ports.CoschedulingController),
	}
	if c.o.DisableQPSLimits {
		args = append(args, "--qps=5000", "--burst=10000")
	}
	ctrl, err := c.sup.start(CoschedulingController, args, false)
	if err != nil {
		return err
	}
	servingHTTP, err := c.httpsClient(false)
	if err != nil {
		return err
	}
	if err := c.waitHTTP(ctx, sched, fmt.Sprintf("https://%s/healthz", loopback(c.ports.CoschedulingScheduler)), servingHTTP); err != nil {
		return err
	}
	if err := c.waitHTTP(ctx, ctrl, fmt.Sprintf("http://%s/readyz", loopback(c.ports.CoschedulingController)), nil); err != nil {
		return err
	}
	c.progress("%s (profile %s) and %s ready", CoschedulingScheduler, CoschedulingSchedulerName, CoschedulingController)
	return nil
}
