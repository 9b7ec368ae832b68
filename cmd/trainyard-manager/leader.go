package main

import (
	"flag"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

// leaderOptions are the leader election's timings. A killed leader's lease
// must expire before another replica leads, so leaseDuration bounds failover
// after a crash; a leader that cannot renew within renewDeadline (an API
// server too slow to answer, e.g. saturated by a burst) gives up leading and
// the process exits, so a short deadline trades faster failover for spurious
// restarts under load (docs/performance.md, "Chaos"). A clean shutdown
// releases the lease at once, so rolling updates never wait for it.
type leaderOptions struct {
	leaseDuration, renewDeadline, retryPeriod time.Duration
}

func (o *leaderOptions) bindFlags(fs *flag.FlagSet) {
	// controller-runtime's (and client-go's) defaults.
	fs.DurationVar(&o.leaseDuration, "leader-election-lease-duration", 15*time.Second, "how long a leader's lease lasts without renewal: the longest wait for a new leader after the leader dies")
	fs.DurationVar(&o.renewDeadline, "leader-election-renew-deadline", 10*time.Second, "how long the leader keeps retrying to renew before it gives up leading (and exits)")
	fs.DurationVar(&o.retryPeriod, "leader-election-retry-period", 2*time.Second, "how often replicas try to acquire or renew the lease")
}

// apply sets the timings on the manager's options, checking the order
// client-go requires (lease > renew deadline > retry period × 1.2).
func (o *leaderOptions) apply(opts *ctrl.Options) error {
	if o.leaseDuration <= o.renewDeadline {
		return fmt.Errorf("--leader-election-lease-duration (%s) must be longer than --leader-election-renew-deadline (%s)", o.leaseDuration, o.renewDeadline)
	}
	if float64(o.renewDeadline) <= 1.2*float64(o.retryPeriod) {
		return fmt.Errorf("--leader-election-renew-deadline (%s) must be longer than 1.2 × --leader-election-retry-period (%s)", o.renewDeadline, o.retryPeriod)
	}
	opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = &o.leaseDuration, &o.renewDeadline, &o.retryPeriod
	// The manager's main returns right after the manager stops, so releasing
	// the lease on the way out is safe: nothing reconciles after it.
	opts.LeaderElectionReleaseOnCancel = true
	return nil
}
