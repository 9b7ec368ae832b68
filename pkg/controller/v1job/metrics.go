package v1job

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are a kind's metrics of one manager; they record nothing on a nil
// *Metrics.
type Metrics struct {
	kind       string
	conditions *prometheus.CounterVec
}

// NewMetrics returns the kind's metrics:
// trainyard_<kind>_condition_transitions_total{type}.
func (d *Def) NewMetrics() *Metrics {
	return &Metrics{kind: d.Kind, conditions: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: fmt.Sprintf("trainyard_%s_condition_transitions_total", d.Name),
		Help: d.Kind + " conditions turning True (Created, Running, Restarting, Succeeded, Failed, Suspended), by type.",
	}, []string{"type"})}
}

// Register adds the metrics to reg (the manager's registry).
func (m *Metrics) Register(reg prometheus.Registerer) error {
	if err := reg.Register(m.conditions); err != nil {
		return fmt.Errorf("registering %s metrics: %w", m.kind, err)
	}
	return nil
}

// ConditionTrue counts a condition turning True.
func (m *Metrics) ConditionTrue(condition string) {
	if m != nil {
		m.conditions.WithLabelValues(condition).Inc()
	}
}
