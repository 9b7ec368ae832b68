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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "trainer.kubeflow.org", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this package.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the kinds of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
