package runtime

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// CompletionIndexAnnotation is set by the Job controller on every pod of an
// Indexed Job; node ranks, process ids and task ids come from it.
const CompletionIndexAnnotation = "batch.kubernetes.io/job-completion-index"

// CompletionIndexEnv is a variable whose value is the pod's completion index
// (0..N-1 in the trainer job), read through the downward API.
func CompletionIndexEnv(name string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
		FieldPath: fmt.Sprintf("metadata.annotations['%s']", CompletionIndexAnnotation)}}}
}

// EnvNames is the set of variable names in env.
func EnvNames(env []corev1.EnvVar) map[string]bool {
	out := make(map[string]bool, len(env))
	for _, e := range env {
		out[e.Name] = true
	}
	return out
}
