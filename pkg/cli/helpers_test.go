package cli

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// pod is a JobSet pod of replicated job rj with a completion index (or none when
// index is ""), in phase, created at t0+age, with one container.
func pod(name, rj, index string, phase corev1.PodPhase, age time.Duration, c corev1.Container) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0.Add(age)),
			Labels: map[string]string{"jobset.sigs.k8s.io/jobset-name": "j", "jobset.sigs.k8s.io/replicatedjob-name": rj}},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{c}},
		Status: corev1.PodStatus{Phase: phase},
	}
	if index != "" {
		p.Labels["batch.kubernetes.io/job-completion-index"] = index
	}
	return p
}

func nodeContainer(res corev1.ResourceRequirements, env ...corev1.EnvVar) corev1.Container {
	return corev1.Container{Name: "node", Resources: res, Env: env}
}

func nproc(v string) corev1.EnvVar { return corev1.EnvVar{Name: "PET_NPROC_PER_NODE", Value: v} }

func cond(typ string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg}
}
