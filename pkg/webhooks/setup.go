package webhooks

import (
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
)

// Setup registers every webhook with the manager's webhook server.
func Setup(mgr ctrl.Manager, fw *framework.Framework) error {
	if err := ctrl.NewWebhookManagedBy(mgr, &trainer.TrainJob{}).
		WithDefaulter(&TrainJobDefaulter{Clock: clock.RealClock{}}).
		WithValidator(&TrainJobValidator{Client: mgr.GetClient(), Framework: fw}).
		Complete(); err != nil {
		return err
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &trainer.TrainingRuntime{}).WithValidator(TrainingRuntimeValidator{Framework: fw}).Complete(); err != nil {
		return err
	}
	return ctrl.NewWebhookManagedBy(mgr, &trainer.ClusterTrainingRuntime{}).WithValidator(ClusterTrainingRuntimeValidator{Framework: fw}).Complete()
}
