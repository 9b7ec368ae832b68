// Package v1 holds the legacy Kubeflow Training Operator PyTorchJob API
// (kubeflow.org/v1, kind PyTorchJob), wire-compatible with training-operator
// v1.9: the same group, version, field names and status shape, so that existing
// PyTorchJob manifests, kubectl scripts, HPAs and Kueue's built-in
// kubeflow.org/pytorchjob integration work against Trainyard unchanged.
//
// Only PyTorchJob is served; the other v1 kinds (TFJob, MPIJob, ...) are not.
// Defaults are applied in memory by the controller (pkg/legacy/pytorchjob), as
// training-operator v1.9 did, so a job stored without them runs as in v1.
// Unlike v1.9, which had only a validating webhook, Trainyard's defaulting
// webhook also stores most of them on create (pkg/webhooks).
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

	// SchemeBuilder registers the kinds of this package. It is apimachinery's,
	// so that importing the API needs no controller-runtime.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the kinds of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// addKnownTypes registers every kind of this package with its list.
func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&PyTorchJob{},
		&PyTorchJobList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
