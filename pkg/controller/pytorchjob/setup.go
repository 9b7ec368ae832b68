package pytorchjob

import (
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
	legacy "github.com/trainyard/trainyard/pkg/legacy/pytorchjob"
)

// Options tune the controller.
type Options struct {
	// MaxConcurrentReconciles is the number of PyTorchJobs reconciled at once.
	MaxConcurrentReconciles int
	// Clock decides deadlines and TTLs; the real clock when nil.
	Clock clock.PassiveClock
}

// SetupWithManager registers the PyTorchJob controller on the generic
// reconciler. The manager's scheme must include kubeflow.org/v1
// (apis/kubeflow/v1.AddToScheme).
//
// Without the pytorchjobs.kubeflow.org CRD the controller is not started (and
// says so), so that installing Trainyard without it keeps TrainJobs working.
func SetupWithManager(mgr ctrl.Manager, opts Options) error {
	log := ctrl.Log.WithName("setup")
	gk := schema.GroupKind{Group: kubeflowv1.GroupVersion.Group, Kind: kubeflowv1.PyTorchJobKind}
	if _, err := mgr.GetRESTMapper().RESTMapping(gk, kubeflowv1.GroupVersion.Version); err != nil {
		if meta.IsNoMatchError(err) {
			log.Info("PyTorchJob controller not started: the pytorchjobs.kubeflow.org CRD is not installed")
			return nil
		}
		return fmt.Errorf("looking up the PyTorchJob API: %w", err)
	}
	registerMetrics.Do(func() { crmetrics.Registry.MustRegister(conditionTransitions) })
	_, err := jobframework.SetupWithManager(mgr, jobframework.Config{
		Adapter:                 Adapter{},
		Owns:                    legacy.Owned(),
		Name:                    "pytorchjob",
		MaxConcurrentReconciles: opts.MaxConcurrentReconciles,
		Clock:                   opts.Clock,
	})
	return err
}

var (
	registerMetrics sync.Once
	// conditionTransitions counts conditions turning True, by type.
	conditionTransitions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "trainyard_pytorchjob_condition_transitions_total",
		Help: "PyTorchJob conditions turning True (Created, Running, Restarting, Succeeded, Failed, Suspended), by type.",
	}, []string{"type"})
)

// recordTransitions counts the conditions that are True now and were not before.
func recordTransitions(old, cur *kubeflowv1.JobStatus) {
	for _, c := range cur.Conditions {
		if c.Status == corev1.ConditionTrue && !legacy.IsTrue(old, c.Type) {
			conditionTransitions.WithLabelValues(string(c.Type)).Inc()
		}
	}
}
