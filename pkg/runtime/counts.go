package runtime

import (
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

// CheckNumNodes is the one rule for a node count (spec.trainer.numNodes,
// mlPolicy.numNodes, the count a TrainJob resolves to): at least 1.
func CheckNumNodes(path *field.Path, n int32) *field.Error {
	if n < 1 {
		return field.Invalid(path, n, "must be at least 1")
	}
	return nil
}
