//go:build with_kubelet

package main

import (
	"context"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // the JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go's metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // the version metric
	"k8s.io/kubernetes/cmd/kubelet/app"
)

func init() {
	components["kubelet"] = func() int { return cli.Run(app.NewKubeletCommand(context.Background())) }
}
