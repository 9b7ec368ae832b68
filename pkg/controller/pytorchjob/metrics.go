package pytorchjob

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the PyTorchJob kind's metrics of one manager; they record
// nothing on a nil *Metrics.
type Metrics struct {
	conditions *prometheus.CounterVec
}

// NewMetrics returns the PyTorchJob metrics.
func NewMetrics() *Metrics {
	return &Metrics{conditions: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "trainyard_pytorchjob_condition_transitions_total",
		Help: "PyTorchJob conditions turning True (Created, Running, Restarting, Succeeded, Failed, Suspended), by type.",
	}, []string{"type"})}
}

// Register adds the metrics to reg (the manager's registry).
func (m *Metrics) Register(reg prometheus.Registerer) error {
	if err := reg.Register(m.conditions); err != nil {
		return fmt.Errorf("registering PyTorchJob metrics: %w", err)
	}
	return nil
}

// ConditionTrue counts a PyTorchJob condition turning True.
func (m *Metrics) ConditionTrue(condition string) {
	if m != nil {
		m.conditions.WithLabelValues(condition).Inc()
	}
}
