//go:build with_kube_apiserver

package main

import (
	_ "time/tzdata" // as cmd/kube-apiserver: time zones for CronJobs

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // the JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go's metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // the version metric
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func init() {
	components["kube-apiserver"] = func() int { return cli.Run(app.NewAPIServerCommand()) }
}
