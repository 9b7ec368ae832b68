package processnode

import (
	"maps"

	corev1 "k8s.io/api/core/v1"

	"github.com/trainyard/trainyard/pkg/processnode/gpus"
)

// allocateGPUs gives the pod its GPUs (gpuAllocator) before anything of it
// runs, and names them on the pod. It reports false when the pod cannot run:
// it failed, as the kubelet fails a pod whose devices cannot be allocated.
func (r *podRun) allocateGPUs() bool {
	devices, err := r.p.gpus.allocate(r.snapshot())
	if err != nil {
		r.fail(reasonUnexpectedAdmission, err.Error())
		return false
	}
	r.update(func() {
		r.devices = devices
		r.annotateGPUsLocked()
	})
	if len(devices) > 0 {
		r.logf("GPUs: %s", gpus.FormatAnnotation(devices))
	}
	return true
}

// annotateGPUsLocked sets gpus.Annotation on the pod the provider reports.
// virtual-kubelet writes a pod's status with an update of pods/status that
// carries the provider's copy of the whole pod, and the API server keeps the
// labels and annotations of such an update: the annotation goes to the API
// server with the next status, and must stay on the copy (UpdatePod replaces
// its annotations with the API server's, which may not have it yet), or a
// status written from a copy without it would remove it again. A separate
// patch of the pod would race with those status updates.
func (r *podRun) annotateGPUsLocked() {
	v := gpus.FormatAnnotation(r.devices)
	if v == "" || r.pod.Annotations[gpus.Annotation] == v {
		return
	}
	a := maps.Clone(r.pod.Annotations)
	if a == nil {
		a = map[string]string{}
	}
	a[gpus.Annotation] = v
	r.pod.Annotations = a
}

// releaseGPUs frees the pod's GPUs once it has ended (Succeeded, Failed,
// deleted) and its processes are gone, but not when the agent stops: the pod
// has not ended for the API server, and the next agent runs it again on the
// same GPUs.
func (r *podRun) releaseGPUs() {
	r.mu.Lock()
	shutdown := r.stopping && r.stopReason == stopShutdown
	r.mu.Unlock()
	if shutdown {
		return
	}
	if err := r.p.gpus.release(r.uid); err != nil {
		r.p.logf("pod %s: %v", r.key, err)
	}
}

// retainGPUs frees the GPUs recorded for pods that no longer need them, once
// the agent has listed the pods bound to its node: pods gone from the API
// server, finished or being deleted while no agent ran (the previous agent's
// processes are gone; a pod being deleted is not run again). Pods this agent
// runs keep theirs: they are looked up while the allotments are held, so
// that a pod that came after the list and got GPUs meanwhile is one of them.
func (p *Provider) retainGPUs(listed []*corev1.Pod) {
	keep := map[string]bool{}
	for _, pod := range listed {
		if pod.DeletionTimestamp == nil && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			keep[string(pod.UID)] = true
		}
	}
	running := func(uid string) bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, r := range p.pods {
			if r.uid == uid {
				return true
			}
		}
		return false
	}
	if err := p.gpus.retain(func(uid string) bool { return keep[uid] || running(uid) }); err != nil {
		p.logf("GPUs: %v", err)
	}
}
