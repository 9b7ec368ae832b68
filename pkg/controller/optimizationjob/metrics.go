package optimizationjob

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/childsync"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
)

// Metrics are the OptimizationJob kind's metrics of one manager; they
// record nothing on a nil *Metrics.
type Metrics struct {
	trialsCreated  prometheus.Counter
	trialsFinished *prometheus.CounterVec
	jobsFinished   *prometheus.CounterVec
}

// NewMetrics returns the OptimizationJob metrics.
func NewMetrics() *Metrics {
	return &Metrics{
		trialsCreated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "trainyard_optimizationjob_trials_created_total",
			Help: "Trials (TrainJobs) created by OptimizationJobs.",
		}),
		trialsFinished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "trainyard_optimizationjob_trials_finished_total",
			Help: "Trials of OptimizationJobs that finished, by state (Succeeded, Failed).",
		}, []string{"state"}),
		jobsFinished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "trainyard_optimizationjob_finished_total",
			Help: "OptimizationJobs that finished, by condition (Complete, Failed).",
		}, []string{"condition"}),
	}
}

// Register adds the metrics to reg (the manager's registry).
func (m *Metrics) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.trialsCreated, m.trialsFinished, m.jobsFinished} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("registering OptimizationJob metrics: %w", err)
		}
	}
	return nil
}

// RecordSync implements jobframework.Recorder: trials created.
func (a Adapter) RecordSync(_ client.Object, sync jobframework.Sync, _ time.Time) {
	if a.Metrics == nil {
		return
	}
	for key, action := range sync.Result.Actions {
		if key.GroupKind == trainJobKind && action == childsync.Created {
			a.Metrics.trialsCreated.Inc()
		}
	}
}

// RecordStatus implements jobframework.Recorder: trials and jobs that
// finished between the two statuses.
func (a Adapter) RecordStatus(old, updated client.Object, _ time.Time) {
	if a.Metrics == nil || updated == nil {
		return
	}
	o, u := old.(*trainer.OptimizationJob), updated.(*trainer.OptimizationJob)
	if u.Status == nil {
		return
	}
	was := map[string]trainer.TrialState{}
	var conds = map[string]bool{}
	if o.Status != nil {
		for _, r := range o.Status.Trials {
			was[r.Name] = r.State
		}
		for _, t := range []string{trainer.OptimizationJobComplete, trainer.OptimizationJobFailed} {
			conds[t] = apimeta.IsStatusConditionTrue(o.Status.Conditions, t)
		}
	}
	for _, r := range u.Status.Trials {
		if r.State != trainer.TrialRunning && was[r.Name] != r.State {
			a.Metrics.trialsFinished.WithLabelValues(string(r.State)).Inc()
		}
	}
	for _, t := range []string{trainer.OptimizationJobComplete, trainer.OptimizationJobFailed} {
		if apimeta.IsStatusConditionTrue(u.Status.Conditions, t) && !conds[t] {
			a.Metrics.jobsFinished.WithLabelValues(t).Inc()
		}
	}
}
