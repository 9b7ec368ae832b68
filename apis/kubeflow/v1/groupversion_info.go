// Package v1 holds the legacy Kubeflow Training Operator PyTorchJob API
// (kubeflow.org/v1, kind PyTorchJob), wire-compatible with training-operator
// v1.9: the same group, version, field names and status shape, so that existing
// PyTorchJob manifests, kubectl scripts, HPAs and Kueue's built-in
// kubeflow.org/pytorchjob integration work against Trainyard unchanged.
//
// Served: PyTorchJob, MPIJob and XGBoostJob.
// Defaults are applied in memory by the controller (pkg/controller/pytorchjob),
// as training-operator v1.9 did, so a job stored without them runs as in v1.
// Unlike v1.9, which had only a validating webhook, Trainyard's defaulting
// webhook also stores most of them on create (pkg/controller/pytorchjob).
//
// +kubebuilder:object:generate=true
// +groupName=kubeflow.org
package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is kubeflow.org/v1.
	GroupVersion = schema.GroupVersion{Group: "kubeflow.org", Version: "v1"}

	// SchemeBuilder registers the kinds of this package: the group version
	// here, each kind in its own file's init (so that a new kind touches no
	// file of another). It is apimachinery's, so that importing the API needs
	// no controller-runtime.
	SchemeBuilder = runtime.NewSchemeBuilder(addGroupVersion)

	// AddToScheme adds the kinds of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// addGroupVersion registers the group version's common types.
func addGroupVersion(s *runtime.Scheme) error {
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// register registers a kind of this package and its list (from the kind's
// file's init).
func register(objs ...runtime.Object) {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, objs...)
		return nil
	})
}
