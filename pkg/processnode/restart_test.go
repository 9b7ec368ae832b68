package processnode

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func TestShouldRestart(t *testing.T) {
	for _, tc := range []struct {
		policy         corev1.RestartPolicy
		code           int32
		want, wantInit bool
	}{
		{corev1.RestartPolicyAlways, 0, true, false},
		{corev1.RestartPolicyAlways, 1, true, true},
		{corev1.RestartPolicyOnFailure, 0, false, false},
		{corev1.RestartPolicyOnFailure, 137, true, true},
		{corev1.RestartPolicyNever, 0, false, false},
		{corev1.RestartPolicyNever, 1, false, false},
		{"", 0, true, false},
	} {
		if got := ShouldRestart(tc.policy, tc.code); got != tc.want {
			t.Errorf("ShouldRestart(%q, %d) = %v", tc.policy, tc.code, got)
		}
		if got := ShouldRestartInit(tc.policy, tc.code); got != tc.wantInit {
			t.Errorf("ShouldRestartInit(%q, %d) = %v", tc.policy, tc.code, got)
		}
	}
}

func TestRestartDelay(t *testing.T) {
	base, maxDelay := 10*time.Second, 5*time.Minute
	for restarts, want := range map[int32]time.Duration{
		0: 0, 1: 10 * time.Second, 2: 20 * time.Second, 3: 40 * time.Second, 5: 160 * time.Second, 6: maxDelay, 40: maxDelay,
	} {
		if got := RestartDelay(restarts, time.Second, base, maxDelay); got != want {
			t.Errorf("RestartDelay(%d) = %s, want %s", restarts, got, want)
		}
	}
	if got := RestartDelay(7, 11*time.Minute, base, maxDelay); got != 0 {
		t.Errorf("after a long run the back-off starts over, got %s", got)
	}
}

func running() corev1.ContainerStatus {
	return corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
}
func exited(code int32) corev1.ContainerStatus {
	return corev1.ContainerStatus{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}}
}
func waitingFirst() corev1.ContainerStatus {
	return corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reasonCreating}}}
}
func backingOff() corev1.ContainerStatus {
	s := exited(1)
	return corev1.ContainerStatus{RestartCount: 1, LastTerminationState: s.State,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reasonCrashLoop}}}
}

func TestPodPhase(t *testing.T) {
	never, onFailure, always := corev1.RestartPolicyNever, corev1.RestartPolicyOnFailure, corev1.RestartPolicyAlways
	for _, tc := range []struct {
		name       string
		policy     corev1.RestartPolicy
		initDone   bool
		initFailed bool
		statuses   []corev1.ContainerStatus
		want       corev1.PodPhase
	}{
		{"init running", never, false, false, []corev1.ContainerStatus{waitingFirst()}, corev1.PodPending},
		{"init failed", never, false, true, []corev1.ContainerStatus{waitingFirst()}, corev1.PodFailed},
		{"creating", never, true, false, []corev1.ContainerStatus{waitingFirst()}, corev1.PodPending},
		{"one not started yet", never, true, false, []corev1.ContainerStatus{running(), waitingFirst()}, corev1.PodPending},
		{"running", never, true, false, []corev1.ContainerStatus{running()}, corev1.PodRunning},
		{"one done one running", never, true, false, []corev1.ContainerStatus{exited(0), running()}, corev1.PodRunning},
		{"succeeded", never, true, false, []corev1.ContainerStatus{exited(0), exited(0)}, corev1.PodSucceeded},
		{"failed", never, true, false, []corev1.ContainerStatus{exited(0), exited(2)}, corev1.PodFailed},
		{"OnFailure: failed but restarting", onFailure, true, false, []corev1.ContainerStatus{exited(1)}, corev1.PodRunning},
		{"OnFailure: back-off", onFailure, true, false, []corev1.ContainerStatus{backingOff()}, corev1.PodRunning},
		{"OnFailure: succeeded", onFailure, true, false, []corev1.ContainerStatus{exited(0)}, corev1.PodSucceeded},
		{"Always: exited 0 restarts", always, true, false, []corev1.ContainerStatus{exited(0)}, corev1.PodRunning},
	} {
		if got := PodPhase(tc.policy, tc.initDone, tc.initFailed, tc.statuses); got != tc.want {
			t.Errorf("%s: phase %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestExitStatus(t *testing.T) {
	if exitStatus(3, 0) != 3 || exitStatus(0, 9) != 137 || exitStatus(0, 15) != 143 {
		t.Error("exit codes: code itself, or 128+signal")
	}
}
