//go:build with_kube_scheduler

package main

import (
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // the JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go's metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // the version metric
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func init() {
	components["kube-scheduler"] = func() int { return cli.Run(app.NewSchedulerCommand()) }
}
