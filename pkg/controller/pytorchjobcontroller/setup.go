package pytorchjobcontroller

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
	legacy "github.com/trainyard/trainyard/pkg/legacy/pytorchjob"
	"github.com/trainyard/trainyard/pkg/metrics"
)

// Options tune the PyTorchJob controller.
type Options struct {
	// MaxConcurrentReconciles is the number of jobs reconciled at once.
	MaxConcurrentReconciles int
	// Clock decides deadlines and TTLs; the real clock when nil.
	Clock clock.PassiveClock
	// GangScheduler puts every PyTorchJob's pods in a gang (v1's
	// --gang-scheduler-name); runPolicy.schedulingPolicy shapes it.
	GangScheduler legacy.GangScheduler
}

// SetupWithManager registers the PyTorchJob controller on the generic
// reconciler. The manager's scheme must include kubeflow.org/v1
// (apis/kubeflow/v1.AddToScheme).
//
// Without the pytorchjobs.kubeflow.org CRD the controller is not started (and
// says so), so that installing Trainyard without it keeps TrainJobs working.
func SetupWithManager(mgr ctrl.Manager, opts Options) error {
	served, err := legacy.Served(mgr.GetRESTMapper())
	if err != nil {
		return err
	}
	if !served {
		ctrl.Log.WithName("setup").Info("PyTorchJob controller not started: the pytorchjobs.kubeflow.org CRD is not installed")
		return nil
	}
	fw, err := legacy.NewFramework()
	if err != nil {
		return fmt.Errorf("registering PyTorchJob plugins: %w", err)
	}
	_, err = jobframework.SetupWithManager(mgr, jobframework.Config{
		Options: jobframework.Options{MaxConcurrentReconciles: opts.MaxConcurrentReconciles, Clock: opts.Clock},
		Adapter: Adapter{Framework: fw, GangScheduler: opts.GangScheduler},
		Owns:    fw.Owns(),
		Name:    "pytorchjob",
	})
	return err
}

// recordTransitions counts the conditions that are True now and were not before.
func recordTransitions(old, cur *kubeflowv1.JobStatus) {
	for _, c := range cur.Conditions {
		if c.Status == corev1.ConditionTrue && !legacy.IsTrue(old, c.Type) {
			metrics.PyTorchJobConditionTransitions.WithLabelValues(string(c.Type)).Inc()
		}
	}
}
