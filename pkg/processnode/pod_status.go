package processnode

import (
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// snapshot returns the pod with its current status.
func (r *podRun) snapshot() *corev1.Pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.snapshotLocked()
}

func (r *podRun) snapshotLocked() *corev1.Pod {
	pod := r.pod.DeepCopy()
	st := &pod.Status
	var initStatuses, statuses []corev1.ContainerStatus
	for _, c := range pod.Spec.InitContainers {
		initStatuses = append(initStatuses, *r.statuses[c.Name].DeepCopy())
	}
	for _, c := range pod.Spec.Containers {
		statuses = append(statuses, *r.statuses[c.Name].DeepCopy())
	}
	st.InitContainerStatuses, st.ContainerStatuses = initStatuses, statuses
	if r.ip != "" {
		st.PodIP = r.ip
		st.PodIPs = []corev1.PodIP{{IP: r.ip}}
	}
	if r.phaseOverride != "" {
		st.Phase, st.Reason, st.Message = r.phaseOverride, r.reason, r.message
	} else {
		st.Phase = PodPhase(pod.Spec.RestartPolicy, r.initDone, false, statuses)
		st.Reason, st.Message = "", ""
	}
	allReady := st.Phase == corev1.PodRunning
	for _, s := range statuses {
		if !s.Ready {
			allReady = false
		}
	}
	terminal := st.Phase == corev1.PodSucceeded || st.Phase == corev1.PodFailed
	cond := func(t corev1.PodConditionType, ok bool, reason string) {
		status := corev1.ConditionFalse
		if ok {
			status, reason = corev1.ConditionTrue, ""
		}
		setCondition(st, corev1.PodCondition{Type: t, Status: status, Reason: reason})
	}
	cond(corev1.PodReadyToStartContainers, r.sandboxReady, "")
	cond(corev1.PodInitialized, r.initDone || len(pod.Spec.InitContainers) == 0, "ContainersNotInitialized")
	readyReason := "ContainersNotReady"
	if terminal {
		readyReason = "PodCompleted"
	}
	cond(corev1.ContainersReady, allReady, readyReason)
	cond(corev1.PodReady, allReady, readyReason)
	cond(corev1.PodScheduled, true, "")
	return pod
}

// setCondition sets a condition, keeping its transition time when the status stays.
func setCondition(st *corev1.PodStatus, c corev1.PodCondition) {
	now := metav1.Now()
	for i := range st.Conditions {
		if st.Conditions[i].Type == c.Type {
			if st.Conditions[i].Status != c.Status {
				st.Conditions[i].LastTransitionTime = now
			}
			st.Conditions[i].Status, st.Conditions[i].Reason = c.Status, c.Reason
			return
		}
	}
	c.LastTransitionTime = now
	st.Conditions = append(st.Conditions, c)
}

// update applies f under the lock, keeps the computed status, and tells the pod controller.
func (r *podRun) update(f func()) {
	r.mu.Lock()
	f()
	snap := r.snapshotLocked()
	r.pod.Status.Conditions = snap.Status.Conditions
	r.mu.Unlock()
	r.p.notifyPod(snap)
}

// fail ends a pod that cannot run here.
func (r *podRun) fail(reason, message string) {
	r.logf("failed: %s: %s", reason, message)
	r.mu.Lock()
	r.phaseOverride, r.reason, r.message = corev1.PodFailed, reason, message
	for _, s := range r.statuses {
		if s.State.Terminated == nil {
			s.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exitCodeStartError, Reason: reason, Message: message, FinishedAt: metav1.Now()}}
		}
	}
	r.mu.Unlock()
}

// finish tears the sandbox down and reports the final status.
func (r *podRun) finish() {
	r.mu.Lock()
	sb := r.sb
	r.mu.Unlock()
	r.p.hosts.removeLocal(r.uid)
	if sb != nil {
		sb.stop()
		r.p.net.detach(r.uid)
	}
	r.releaseGPUs()
	_ = os.RemoveAll(filepath.Join(r.dir, "shadow"))
	r.mu.Lock()
	if r.ip != "" {
		r.p.net.alloc.release(r.ip)
	}
	for _, insts := range r.logs {
		for _, l := range insts {
			l.finish()
		}
	}
	// Containers that never ran, or were cut short, end too.
	for _, s := range r.statuses {
		if s.State.Terminated == nil {
			reason, code := "ContainerStatusUnknown", int32(137)
			if s.State.Waiting != nil && s.LastTerminationState.Terminated == nil && s.RestartCount == 0 {
				reason, code = "ContainerCannotRun", exitCodeStartError
			}
			if s.LastTerminationState.Terminated != nil && s.State.Waiting != nil {
				// In back-off: the last run is the end.
				s.State = corev1.ContainerState{Terminated: s.LastTerminationState.Terminated}
				continue
			}
			s.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, FinishedAt: metav1.Now()}}
		}
		s.Ready = false
	}
	if r.phaseOverride == "" && r.stopping {
		// A stopped pod ends Succeeded only if all its containers did.
		r.phaseOverride = corev1.PodSucceeded
		for _, s := range r.statuses {
			if s.State.Terminated != nil && s.State.Terminated.ExitCode != 0 {
				r.phaseOverride = corev1.PodFailed
			}
		}
	}
	if r.phaseOverride == "" {
		var statuses []corev1.ContainerStatus
		for _, c := range r.pod.Spec.Containers {
			statuses = append(statuses, *r.statuses[c.Name])
		}
		ph := PodPhase(r.pod.Spec.RestartPolicy, true, false, statuses)
		if ph != corev1.PodSucceeded && ph != corev1.PodFailed {
			ph = corev1.PodFailed
		}
		r.phaseOverride = ph
	}
	r.mu.Unlock()
	r.update(func() {})
	r.logf("finished: %s", r.snapshot().Status.Phase)
}
