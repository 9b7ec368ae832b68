package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
)

// StopManager sends sig to the Trainyard manager and waits until it is gone. For a
// signal other than SIGKILL it sends SIGKILL after 10s. The manager's webhook
// configurations stay registered, as in a cluster whose manager pod died.
func (c *Cluster) StopManager(sig os.Signal) error {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return fmt.Errorf("unsupported signal %v", sig)
	}
	p, ok := c.sup.find(Manager)
	if !ok {
		return errors.New("the manager is not running")
	}
	return c.sup.stop(p, s, stopGrace)
}

// SetManagerArgs replaces the extra manager arguments (Options.ManagerArgs) for the
// next StartManager; the running manager is not affected.
func (c *Cluster) SetManagerArgs(args []string) {
	c.mu.Lock()
	c.o.ManagerArgs = slices.Clone(args)
	c.mu.Unlock()
	c.sup.mu.Lock()
	c.sup.st.ManagerArgs = slices.Clone(args)
	c.sup.mu.Unlock()
}

// StartManager starts the Trainyard manager (with Options.ManagerArgs, or those of SetManagerArgs) and waits for
// its /readyz; on the first start it also registers its webhook configurations.
// Note that with leader election a restarted manager reconciles only once the
// previous leader's lease has expired (up to 15s after a SIGKILL).
func (c *Cluster) StartManager(ctx context.Context) error {
	if _, ok := c.sup.find(Manager); ok {
		return errors.New("the manager is already running")
	}
	if err := c.StartManagerReplica(ctx, 0); err != nil {
		return err
	}
	if c.o.Bare {
		c.progress("trainyard-manager ready (no webhooks)")
		return nil
	}
	if err := c.applyWebhookConfigs(ctx, Manager); err != nil {
		return err
	}
	c.progress("trainyard-manager ready (webhooks on %s)", loopback(c.ports.ManagerWebhook))
	return nil
}

// RestartKueue restarts Kueue with integrations.frameworks set to frameworks (nil
// means DefaultKueueFrameworks). Kueue's webhook configurations are removed while it
// is down, so that pods, Jobs, JobSets and TrainJobs can still be created meanwhile,
// and registered again once it is ready.
func (c *Cluster) RestartKueue(ctx context.Context, frameworks []string) error {
	if c.o.NoKueue {
		return errors.New("this cluster runs no Kueue (Options.NoKueue)")
	}
	if frameworks == nil {
		frameworks = DefaultKueueFrameworks
	}
	if err := c.deleteWebhookConfigs(ctx, Kueue); err != nil {
		return err
	}
	if p, ok := c.sup.find(Kueue); ok {
		if err := c.sup.stop(p, syscall.SIGTERM, stopGrace); err != nil {
			return err
		}
	}
	if err := c.writeKueueConfig(frameworks); err != nil {
		return err
	}
	c.mu.Lock()
	c.kueueFrameworks = slices.Clone(frameworks)
	c.mu.Unlock()
	c.sup.mu.Lock()
	c.sup.st.KueueFrameworks = slices.Clone(frameworks)
	c.sup.mu.Unlock()
	return c.startKueue(ctx)
}

func (c *Cluster) startJobSet(ctx context.Context) error {
	p, err := c.sup.start(JobSet, []string{filepath.Join(c.o.BinDir, JobSet),
		"--kubeconfig=" + c.Kubeconfig(), "--config=" + filepath.Join(c.o.StateDir, "config", "jobset.yaml")}, false)
	if err != nil {
		return err
	}
	if err := c.waitHTTP(ctx, p, fmt.Sprintf("http://%s/readyz", loopback(c.ports.JobSetHealth)), nil); err != nil {
		return err
	}
	if err := c.applyWebhookConfigs(ctx, JobSet); err != nil {
		return err
	}
	if err := c.waitWebhooksServed(ctx, JobSet); err != nil {
		return err
	}
	c.progress("jobset-controller ready (webhooks on %s)", loopback(c.ports.JobSetWebhook))
	return nil
}

// kueueScript runs in Kueue's private mount namespace: a tmpfs (invisible outside)
// backs an overlay on /etc that adds /etc/kueue/metrics/certs, then Kueue is exec'd,
// so the recorded PID is Kueue's.
const kueueScript = `set -e
mount -t tmpfs -o size=8m,mode=0700 trainyard-kueue "$1"
mkdir "$1/upper" "$1/work"
mount -t overlay trainyard-kueue-etc -o "lowerdir=/etc,upperdir=$1/upper,workdir=$1/work" /etc
mkdir -p /etc/kueue/metrics/certs
cp "$2/tls.crt" "$2/tls.key" /etc/kueue/metrics/certs/
shift 2
exec "$@"`

func (c *Cluster) startKueue(ctx context.Context) error {
	argv := []string{"/bin/sh", "-c", kueueScript, "kueue-ns",
		filepath.Join(c.o.StateDir, "kueue-mnt"), c.pki.servingDir(),
		filepath.Join(c.o.BinDir, Kueue),
		"--kubeconfig=" + c.Kubeconfig(),
		"--config=" + filepath.Join(c.o.StateDir, "config", "kueue.yaml"),
		// Otherwise Kueue serves its visibility API on :8082, on every interface.
		"--feature-gates=VisibilityOnDemand=false",
	}
	p, err := c.sup.start(Kueue, argv, true)
	if err != nil {
		return err
	}
	if err := c.waitHTTP(ctx, p, fmt.Sprintf("http://%s/readyz", loopback(c.ports.KueueHealth)), nil); err != nil {
		return err
	}
	if err := c.applyWebhookConfigs(ctx, Kueue); err != nil {
		return err
	}
	if err := c.waitWebhooksServed(ctx, Kueue); err != nil {
		return err
	}
	c.progress("kueue-controller ready (webhooks on %s, frameworks %v)", loopback(c.ports.KueueWebhook), c.KueueFrameworks())
	return nil
}
