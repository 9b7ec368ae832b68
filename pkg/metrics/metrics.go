// Package metrics holds the manager's own Prometheus metrics (the build it
// runs). Each job kind defines its metrics in its own package and registers
// them with the registry of its manager (jobframework.Manager's Metrics; the
// manager's metrics endpoint serves controller-runtime's registry, next to
// controller-runtime's own reconcile counts, errors and durations per
// controller, and workqueue depth), only when the kind is enabled. Nothing is
// registered globally.
package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/trainyard/trainyard/pkg/version"
)

// RegisterBuildInfo adds the build the manager runs (BuildInfo) to reg.
func RegisterBuildInfo(reg prometheus.Registerer) error {
	if err := reg.Register(BuildInfo(version.Get())); err != nil {
		return fmt.Errorf("registering build info: %w", err)
	}
	return nil
}

// BuildInfo is the gauge trainyard_build_info{version,git_commit,go_version},
// always 1, as Prometheus' <component>_build_info convention has it: queries
// join on its labels to tell which build each replica runs (during a rollout,
// or when a metric changed with a release).
func BuildInfo(v version.Info) prometheus.Collector {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "trainyard_build_info",
		Help: "The build of the Trainyard manager: version, git commit and Go version as labels; always 1.",
	}, []string{"version", "git_commit", "go_version"})
	g.WithLabelValues(v.Version, v.GitCommit, v.GoVersion).Set(1)
	return g
}
