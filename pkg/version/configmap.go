package version

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The ConfigMap through which a cluster tells clients which control plane it
// runs. Kubeflow Trainer publishes kubeflow-trainer-public in its system
// namespace with the key kubeflow_trainer_version, and Kubeflow's Python SDK
// (TrainerClient) reads that key when it starts, from the namespace in
// $KUBEFLOW_SYSTEM_NAMESPACE (default kubeflow-system), and logs a warning when
// it cannot; it compares nothing. Trainyard installs the same ConfigMap in its
// own namespace (manifests/base/manager/public_configmap.yaml, the Helm chart),
// with its own version under TrainyardVersionKey, which `trainyard version`
// reads, and a copy in SDKNamespace (manifests/kubeflow-system), where the SDK
// looks by default.
const (
	ConfigMapName             = "kubeflow-trainer-public"
	KubeflowTrainerVersionKey = "kubeflow_trainer_version"
	TrainyardVersionKey       = "trainyard_version"

	// KubeflowTrainerVersion is the Kubeflow Trainer release whose API
	// (trainer.kubeflow.org/v1alpha1 and its runtimes) Trainyard serves.
	KubeflowTrainerVersion = "v2.4.0"

	// DefaultNamespace is the namespace the manifests and the chart install
	// Trainyard into.
	DefaultNamespace = "trainyard-system"

	// SDKNamespace is where the Kubeflow SDK looks for the ConfigMap unless
	// $KUBEFLOW_SYSTEM_NAMESPACE says otherwise (Kubeflow Trainer's
	// namespace). The manifests, the chart and the local cluster install a
	// copy there too, so that the SDK finds it with its defaults.
	SDKNamespace = "kubeflow-system"
)

// ConfigMap is the public ConfigMap of a Trainyard of this version in the
// namespace.
func ConfigMap(namespace, trainyardVersion string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName, Namespace: namespace,
			Labels: map[string]string{"app.kubernetes.io/name": "trainyard"}},
		Data: map[string]string{
			KubeflowTrainerVersionKey: KubeflowTrainerVersion,
			TrainyardVersionKey:       trainyardVersion,
		},
	}
}
