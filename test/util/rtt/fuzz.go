package rtt

import (
	"fmt"

	"sigs.k8s.io/yaml"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
)

// FuzzRuntimeSpec is a TrainingRuntime spec for fuzz targets:
// runtimes/torch-distributed.yaml plus a dataset initializer and a sidecar, so
// that fuzzed overrides and patches can reach each kind of replicated job and
// container.
const FuzzRuntimeSpec = `
mlPolicy: {numNodes: 1, torch: {}}
template:
  spec:
    replicatedJobs:
    - name: dataset-initializer
      template:
        metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: dataset-initializer}}
        spec: {template: {spec: {containers: [{name: dataset-initializer, image: busybox}]}}}
    - name: node
      template:
        metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}
        spec: {template: {spec: {containers: [{name: node, image: pytorch}, {name: logger, image: busybox}]}}}
`

// FuzzRuntime is FuzzRuntimeSpec as the ClusterTrainingRuntime "torch".
func FuzzRuntime() *runtime.Runtime {
	var spec trainer.TrainingRuntimeSpec
	if err := yaml.Unmarshal([]byte(FuzzRuntimeSpec), &spec); err != nil {
		panic(fmt.Sprintf("FuzzRuntimeSpec: %v", err))
	}
	return &runtime.Runtime{Kind: trainer.ClusterTrainingRuntimeKind, Name: "torch", Spec: spec}
}
