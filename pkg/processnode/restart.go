package processnode

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The kubelet's crash-loop back-off: the first restart is immediate, then 10s,
// doubling up to 5 minutes; a container that ran for 10 minutes starts over.
const (
	DefaultBackoffBase  = 10 * time.Second
	DefaultBackoffMax   = 5 * time.Minute
	backoffResetAfter   = 10 * time.Minute
	defaultGracePeriod  = 30 * time.Second
	exitCodeStartError  = 128
	reasonStartError    = "StartError"
	reasonCrashLoop     = "CrashLoopBackOff"
	reasonConfigError   = "CreateContainerConfigError"
	reasonCreating      = "ContainerCreating"
	reasonPodInit       = "PodInitializing"
	reasonCompleted     = "Completed"
	reasonError         = "Error"
	reasonDeadline      = "DeadlineExceeded"
	messageDeadline     = "Pod was active on the node longer than the specified deadline"
	reasonUnsupported   = "UnsupportedPodSpec"
	reasonSandboxFailed = "SandboxFailed"
)

// ShouldRestart reports whether a container that exited with exitCode runs again
// under the pod's restartPolicy: Always restarts every exit, OnFailure only
// non-zero ones, Never none.
func ShouldRestart(policy corev1.RestartPolicy, exitCode int32) bool {
	switch policy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return exitCode != 0
	default: // Always, and the API default
		return true
	}
}

// ShouldRestartInit is ShouldRestart for init containers: they must succeed, so
// Always behaves like OnFailure.
func ShouldRestartInit(policy corev1.RestartPolicy, exitCode int32) bool {
	if policy == corev1.RestartPolicyNever {
		return false
	}
	return exitCode != 0
}

// RestartDelay is how long a container waits before its next start, given how many
// times it was restarted already and how long its last run lasted.
func RestartDelay(restarts int32, lastRun, base, maxDelay time.Duration) time.Duration {
	if restarts <= 0 || lastRun >= backoffResetAfter {
		return 0
	}
	d := base
	for i := int32(1); i < restarts; i++ {
		d *= 2
		if d >= maxDelay {
			return maxDelay
		}
	}
	if d > maxDelay {
		return maxDelay
	}
	return d
}

// PodPhase derives the phase from the container statuses, as the kubelet does:
// Pending until every container has started once (or while init containers run),
// Running while any runs or will be restarted (a terminated container that the
// restartPolicy restarts counts as such), then Succeeded when every container
// ended with 0 and Failed when any did not. A failed init container that will not
// be restarted fails the pod.
func PodPhase(policy corev1.RestartPolicy, initDone, initFailed bool, statuses []corev1.ContainerStatus) corev1.PodPhase {
	if initFailed {
		return corev1.PodFailed
	}
	if !initDone {
		return corev1.PodPending
	}
	var running, waiting, neverRan, succeeded, failed int
	for _, s := range statuses {
		switch {
		case s.State.Running != nil:
			running++
		case s.State.Terminated != nil && ShouldRestart(policy, s.State.Terminated.ExitCode):
			waiting++ // about to be restarted
		case s.State.Terminated != nil:
			if s.State.Terminated.ExitCode == 0 {
				succeeded++
			} else {
				failed++
			}
		default: // waiting
			if s.LastTerminationState.Terminated == nil && s.RestartCount == 0 {
				neverRan++
			} else {
				waiting++
			}
		}
	}
	switch {
	case neverRan > 0:
		return corev1.PodPending
	case running > 0 || waiting > 0:
		return corev1.PodRunning
	case len(statuses) == 0:
		return corev1.PodPending
	case failed > 0:
		return corev1.PodFailed
	default:
		if policy == corev1.RestartPolicyAlways {
			return corev1.PodRunning
		}
		return corev1.PodSucceeded
	}
}

// exitStatus turns a wait status into the container exit code: the code itself, or
// 128+signal for a process killed by a signal.
func exitStatus(code, signal int) int32 {
	if signal > 0 {
		return int32(128 + signal)
	}
	return int32(code)
}
