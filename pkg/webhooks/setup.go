package webhooks

import (
	"fmt"

	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	legacy "github.com/trainyard/trainyard/pkg/legacy/pytorchjob"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
)

// SetupTrainJob registers the TrainJob webhooks and those of both runtime
// kinds with the manager's webhook server (the TrainJob kind's webhooks).
func SetupTrainJob(mgr ctrl.Manager, fw *framework.Framework) error {
	if err := ctrl.NewWebhookManagedBy(mgr, &trainer.TrainJob{}).
		WithDefaulter(&TrainJobDefaulter{Clock: clock.RealClock{}}).
		WithValidator(&TrainJobValidator{Client: liveOnMiss{Reader: mgr.GetClient(), live: mgr.GetAPIReader()}, Framework: fw}).
		Complete(); err != nil {
		return fmt.Errorf("TrainJob webhooks: %w", err)
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &trainer.TrainingRuntime{}).WithValidator(TrainingRuntimeValidator{Framework: fw}).Complete(); err != nil {
		return fmt.Errorf("TrainingRuntime webhook: %w", err)
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &trainer.ClusterTrainingRuntime{}).WithValidator(ClusterTrainingRuntimeValidator{Framework: fw}).Complete(); err != nil {
		return fmt.Errorf("ClusterTrainingRuntime webhook: %w", err)
	}
	return nil
}

// SetupPyTorchJob registers the PyTorchJob webhooks, only when the cluster
// serves pytorchjobs.kubeflow.org, as the PyTorchJob controller is; the
// manager's scheme must then include kubeflow.org/v1.
func SetupPyTorchJob(mgr ctrl.Manager) error {
	served, err := legacy.Served(mgr.GetRESTMapper())
	if err != nil {
		return err
	}
	if !served {
		mgr.GetLogger().WithName("setup").Info("PyTorchJob webhooks not registered: the pytorchjobs.kubeflow.org CRD is not installed")
		return nil
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &kubeflowv1.PyTorchJob{}).
		WithDefaulter(PyTorchJobDefaulter{}).
		WithValidator(PyTorchJobValidator{}).
		Complete(); err != nil {
		return fmt.Errorf("PyTorchJob webhooks: %w", err)
	}
	return nil
}
