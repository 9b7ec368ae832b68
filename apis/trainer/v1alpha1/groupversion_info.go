// Package v1alpha1 holds Trainyard's TrainJob, TrainingRuntime and
// ClusterTrainingRuntime types. They are served under the Kubeflow Trainer group
// trainer.kubeflow.org/v1alpha1 on purpose: users' YAML, the Kubeflow Python SDK and
// Kueue's built-in TrainJob integration work against Trainyard unchanged.
//
// The schema is the union of the public v2.1 and v2.3 TrainJob shapes: both
// podTemplateOverrides (v2.1) and runtimePatches (v2.3) are accepted, and both are
// normalised by pkg/runtime into one patch mechanism.
//
// +kubebuilder:object:generate=true
// +groupName=trainer.kubeflow.org
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "trainer.kubeflow.org", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this package. It is apimachinery's,
	// so that importing the API needs no controller-runtime.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the kinds of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// addKnownTypes registers every kind of this package with its list.
func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&TrainJob{},
		&TrainJobList{},
		&TrainingRuntime{},
		&TrainingRuntimeList{},
		&ClusterTrainingRuntime{},
		&ClusterTrainingRuntimeList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
