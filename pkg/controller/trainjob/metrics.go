package trainjob

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// Metrics are the TrainJob kind's metrics of one manager. Its recording
// methods do nothing on a nil *Metrics (an adapter built without metrics,
// as unit tests build it).
type Metrics struct {
	// timeToJobSet is the time from a TrainJob's creation to its JobSet's creation.
	timeToJobSet prometheus.Histogram
	// timePending is the time a TrainJob waited for every node to run, from
	// its creation or last resume.
	timePending prometheus.Histogram
	// errors counts problems reported in TrainJob status, by reason.
	errors *prometheus.CounterVec
	// transitions counts phase changes, by the phase entered.
	transitions *prometheus.CounterVec
	byPhase     *byPhase
}

// NewMetrics returns the TrainJob metrics, with a collector that counts
// TrainJobs by phase from reader (the manager's cache) at scrape time, so
// that the gauge never drifts from the objects.
func NewMetrics(reader client.Reader) *Metrics {
	return &Metrics{
		timeToJobSet: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "trainyard_trainjob_time_to_jobset_seconds",
			Help:    "Time from the creation of a TrainJob to the creation of its JobSet.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 16),
		}),
		timePending: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "trainyard_trainjob_pending_seconds",
			Help:    "Time from the creation (or last resume) of a TrainJob until all its nodes ran.",
			Buckets: prometheus.ExponentialBuckets(0.5, 2, 16),
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "trainyard_trainjob_errors_total",
			Help: "Errors reported in TrainJob status (Created=False), by reason.",
		}, []string{"reason"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "trainyard_trainjob_phase_transitions_total",
			Help: "TrainJob phase changes, by the phase entered.",
		}, []string{"phase"}),
		byPhase: &byPhase{reader: reader},
	}
}

// Register adds the metrics to reg (the manager's registry).
func (m *Metrics) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.timeToJobSet, m.timePending, m.errors, m.transitions, m.byPhase} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("registering TrainJob metrics: %w", err)
		}
	}
	return nil
}

// TimeToJobSet records the seconds from a TrainJob's creation to its JobSet's.
func (m *Metrics) TimeToJobSet(seconds float64) {
	if m != nil {
		m.timeToJobSet.Observe(seconds)
	}
}

// TimePending records the seconds a TrainJob waited for all its nodes to run.
func (m *Metrics) TimePending(seconds float64) {
	if m != nil {
		m.timePending.Observe(seconds)
	}
}

// Error counts an error reported in a TrainJob's status.
func (m *Metrics) Error(reason string) {
	if m != nil {
		m.errors.WithLabelValues(reason).Inc()
	}
}

// Transition counts a TrainJob entering a phase.
func (m *Metrics) Transition(phase string) {
	if m != nil {
		m.transitions.WithLabelValues(phase).Inc()
	}
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
