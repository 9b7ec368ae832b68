package pytorchjob

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
)

// Served reports whether the cluster serves kubeflow.org/v1 PyTorchJobs,
// i.e. whether the pytorchjobs.kubeflow.org CRD is installed. Without it the
// manager sets up neither the PyTorchJob controller nor its webhooks, so that
// installing Trainyard without it keeps TrainJobs working.
func Served(mapper meta.RESTMapper) (bool, error) {
	gk := schema.GroupKind{Group: kubeflowv1.GroupVersion.Group, Kind: kubeflowv1.PyTorchJobKind}
	if _, err := mapper.RESTMapping(gk, kubeflowv1.GroupVersion.Version); err != nil {
		if meta.IsNoMatchError(err) {
			return false, nil
		}
		return false, fmt.Errorf("looking up the PyTorchJob API: %w", err)
	}
	return true, nil
}
