package main

import (
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

func TestLeaderOptions(t *testing.T) {
	cases := map[string]struct {
		lease, renew, retry time.Duration
		wantErr             bool
	}{
		"controller-runtime's defaults":       {15 * time.Second, 10 * time.Second, 2 * time.Second, false},
		"fast failover":                       {4 * time.Second, 3 * time.Second, 500 * time.Millisecond, false},
		"lease not longer than the deadline":  {3 * time.Second, 3 * time.Second, time.Second, true},
		"deadline within 1.2 retry periods":   {10 * time.Second, 2 * time.Second, 2 * time.Second, true},
		"deadline just over 1.2 retry period": {10 * time.Second, 2500 * time.Millisecond, 2 * time.Second, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := leaderOptions{leaseDuration: tc.lease, renewDeadline: tc.renew, retryPeriod: tc.retry}
			var opts ctrl.Options
			err := o.apply(&opts)
			if (err != nil) != tc.wantErr {
				t.Fatalf("apply: %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if *opts.LeaseDuration != tc.lease || *opts.RenewDeadline != tc.renew || *opts.RetryPeriod != tc.retry || !opts.LeaderElectionReleaseOnCancel {
				t.Errorf("options %v/%v/%v release %v, want %v/%v/%v and release on cancel", *opts.LeaseDuration, *opts.RenewDeadline, *opts.RetryPeriod, opts.LeaderElectionReleaseOnCancel, tc.lease, tc.renew, tc.retry)
			}
		})
	}
}
