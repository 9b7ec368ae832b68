//go:build with_kube_proxy

package main

import (
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // the JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go's metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // the version metric
	"k8s.io/kubernetes/cmd/kube-proxy/app"
)

func init() {
	components["kube-proxy"] = func() int { return cli.Run(app.NewProxyCommand()) }
}
