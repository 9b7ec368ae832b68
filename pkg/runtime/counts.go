package runtime

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The counts of a TrainJob: processes per node and nodes, one rule each.

// Process-count words numProcPerNode accepts besides an integer (v2.1 form).
const (
	ProcAuto = "auto"
	ProcCPU  = "cpu"
	ProcGPU  = "gpu"
)

// CheckNumProcPerNode is the one rule for numProcPerNode, the same as the
// CRD's CEL rule: an integer >= 1, or one of auto, cpu, gpu. A string of
// digits ("4") is not an integer here, as the API server rejects it too.
func CheckNumProcPerNode(path *field.Path, v intstr.IntOrString) *field.Error {
	if v.Type == intstr.Int {
		if v.IntVal < 1 {
			return field.Invalid(path, v.IntVal, "must be at least 1")
		}
		return nil
	}
	switch v.StrVal {
	case ProcAuto, ProcCPU, ProcGPU:
		return nil
	}
	return field.NotSupported(path, v.StrVal, []string{ProcAuto, ProcCPU, ProcGPU, "an integer >= 1"})
}

// CheckNumNodes is the one rule for a runtime's default node count
// (mlPolicy.numNodes): at least 1.
func CheckNumNodes(path *field.Path, n int32) *field.Error {
	if n < 1 {
		return field.Invalid(path, n, "must be at least 1")
	}
	return nil
}

// CheckTrainerNumNodes is the one rule for the node count a TrainJob asks for
// (spec.trainer.numNodes) and resolves to: at least 0, as in Kubeflow Trainer
// v2.4. 0 runs no training node: the trainer's Job gets no pods, and
// Kubernetes completes a Job of 0 completions at once.
func CheckTrainerNumNodes(path *field.Path, n int32) *field.Error {
	if n < 0 {
		return field.Invalid(path, n, "must be at least 0")
	}
	return nil
}

// CheckSlots is the one rule for an MPI runtime's numProcPerNode
// (mlPolicy.mpi.numProcPerNode, the hostfile's slots): at least 1.
func CheckSlots(path *field.Path, n int32) *field.Error {
	if n < 1 {
		return field.Invalid(path, n, "must be at least 1")
	}
	return nil
}

// MaxReplicatedJobNameLength bounds the names of a runtime's replicated jobs
// (Kubeflow Trainer v2.4): JobSet names pods
// <trainjob>-<replicated job>-<job index>-<pod index>, and a short job name
// leaves the TrainJob's name room in the 63 characters of a host name.
const MaxReplicatedJobNameLength = 20

// CheckReplicatedJobName is the one rule for a runtime's replicated job name.
func CheckReplicatedJobName(path *field.Path, name string) *field.Error {
	if len(name) > MaxReplicatedJobNameLength {
		return field.Invalid(path, name, fmt.Sprintf("must be no more than %d characters", MaxReplicatedJobNameLength))
	}
	return nil
}
