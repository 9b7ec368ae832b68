// Package runtime turns a TrainJob and its runtime into the objects that run it.
//
// The flow is: resolve the runtime (a TrainingRuntime or ClusterTrainingRuntime,
// or the snapshot kept on an existing JobSet) into a Runtime; build an Info, a
// private working copy of the runtime's JobSet template with the TrainJob's
// overrides applied; then let the plugins of pkg/runtime/framework shape the Info,
// in their declared order, and emit objects. Nothing here mutates the TrainJob or
// the runtime object.
package runtime

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// Runtime is a resolved TrainingRuntime or ClusterTrainingRuntime: where it came
// from and a copy of its spec. It is what Trainyard snapshots per TrainJob, so that
// later edits of the runtime object never change a job that already has a JobSet.
type Runtime struct {
	Kind       string                      `json:"kind"`
	Name       string                      `json:"name"`
	UID        types.UID                   `json:"uid,omitempty"`
	Generation int64                       `json:"generation,omitempty"`
	Spec       trainer.TrainingRuntimeSpec `json:"spec"`
}

// FromTrainingRuntime copies a namespaced runtime.
func FromTrainingRuntime(rt *trainer.TrainingRuntime) *Runtime {
	return &Runtime{Kind: trainer.TrainingRuntimeKind, Name: rt.Name, UID: rt.UID, Generation: rt.Generation, Spec: *rt.Spec.DeepCopy()}
}

// FromClusterTrainingRuntime copies a cluster-scoped runtime.
func FromClusterTrainingRuntime(rt *trainer.ClusterTrainingRuntime) *Runtime {
	return &Runtime{Kind: trainer.ClusterTrainingRuntimeKind, Name: rt.Name, UID: rt.UID, Generation: rt.Generation, Spec: *rt.Spec.DeepCopy()}
}

// Encode serialises the snapshot for storage in an annotation.
func (r *Runtime) Encode() (string, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return "", fmt.Errorf("encoding runtime snapshot of %s %q: %w", r.Kind, r.Name, err)
	}
	return string(b), nil
}

// DecodeRuntime reads a snapshot written by Encode.
func DecodeRuntime(s string) (*Runtime, error) {
	var r Runtime
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return nil, fmt.Errorf("decoding runtime snapshot: %w", err)
	}
	if r.Kind == "" || r.Name == "" {
		return nil, fmt.Errorf("decoding runtime snapshot: kind and name are required")
	}
	return &r, nil
}

// RefKind returns the runtime kind a TrainJob refers to, with the API defaults
// applied (apiGroup trainer.kubeflow.org, kind ClusterTrainingRuntime), or an
// error when the reference is to something Trainyard cannot run.
func RefKind(ref trainer.RuntimeRef) (string, error) {
	group := trainer.GroupVersion.Group
	if ref.APIGroup != nil {
		group = *ref.APIGroup
	}
	kind := trainer.ClusterTrainingRuntimeKind
	if ref.Kind != nil {
		kind = *ref.Kind
	}
	if group != trainer.GroupVersion.Group || (kind != trainer.ClusterTrainingRuntimeKind && kind != trainer.TrainingRuntimeKind) {
		return "", fmt.Errorf("unsupported runtime %s.%s: runtimeRef must name a %s or %s in group %s",
			kind, group, trainer.ClusterTrainingRuntimeKind, trainer.TrainingRuntimeKind, trainer.GroupVersion.Group)
	}
	return kind, nil
}
