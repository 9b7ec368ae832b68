// Package metrics defines Trainyard's Prometheus metrics. They are registered
// with controller-runtime's registry and served on the manager's metrics
// endpoint next to controller-runtime's own (reconcile counts, errors and
// durations per controller, workqueue depth).
package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/version"
)

var (
	// TimeToJobSet is the time from a TrainJob's creation to its JobSet's creation.
	TimeToJobSet = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "trainyard_trainjob_time_to_jobset_seconds",
		Help:    "Time from the creation of a TrainJob to the creation of its JobSet.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 16),
	})
	// TimePending is the time a TrainJob waited for every node to run, from its
	// creation or last resume.
	TimePending = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "trainyard_trainjob_pending_seconds",
		Help:    "Time from the creation (or last resume) of a TrainJob until all its nodes ran.",
		Buckets: prometheus.ExponentialBuckets(0.5, 2, 16),
	})
	// Errors counts problems reported in TrainJob status, by reason.
	Errors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "trainyard_trainjob_errors_total",
		Help: "Errors reported in TrainJob status (Created=False), by reason.",
	}, []string{"reason"})
	// Transitions counts phase changes, by the phase entered.
	Transitions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "trainyard_trainjob_phase_transitions_total",
		Help: "TrainJob phase changes, by the phase entered.",
	}, []string{"phase"})
	// PyTorchJobConditionTransitions counts PyTorchJob conditions turning True, by type.
	PyTorchJobConditionTransitions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "trainyard_pytorchjob_condition_transitions_total",
		Help: "PyTorchJob conditions turning True (Created, Running, Restarting, Succeeded, Failed, Suspended), by type.",
	}, []string{"type"})
)

// Register adds Trainyard's metrics, including a collector that counts
// TrainJobs by phase from the manager's cache at scrape time (so the gauge
// never drifts from the objects) and the build the manager runs.
func Register(reader client.Reader) {
	crmetrics.Registry.MustRegister(TimeToJobSet, TimePending, Errors, Transitions, PyTorchJobConditionTransitions, &byPhase{reader: reader},
		BuildInfo(version.Get()))
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

var phaseDesc = prometheus.NewDesc("trainyard_trainjobs", "TrainJobs by phase.", []string{"phase"}, nil)

type byPhase struct{ reader client.Reader }

func (c *byPhase) Describe(ch chan<- *prometheus.Desc) { ch <- phaseDesc }

func (c *byPhase) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var list trainer.TrainJobList
	if err := c.reader.List(ctx, &list); err != nil {
		ch <- prometheus.NewInvalidMetric(phaseDesc, err)
		return
	}
	counts := map[trainer.TrainJobPhase]int{}
	for _, p := range []trainer.TrainJobPhase{trainer.TrainJobPending, trainer.TrainJobRunning, trainer.TrainJobSuspendedPhase,
		trainer.TrainJobCompletePhase, trainer.TrainJobFailedPhase} {
		counts[p] = 0
	}
	for _, j := range list.Items {
		phase := j.Status.Phase
		if phase == "" {
			phase = trainer.TrainJobPending
		}
		counts[phase]++
	}
	for p, n := range counts {
		ch <- prometheus.MustNewConstMetric(phaseDesc, prometheus.GaugeValue, float64(n), string(p))
	}
}
