package processnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podRun runs one pod: its sandbox, its init containers one after the other, then
// its containers, each restarted per the restartPolicy, until every container is
// done for good or the pod is stopped (deleted, past its activeDeadlineSeconds, or
// the agent stops).
type podRun struct {
	p   *Provider
	key string
	uid string
	dir string

	mu       sync.Mutex
	pod      *corev1.Pod // latest metadata and spec; Status is ours
	statuses map[string]*corev1.ContainerStatus
	logs     map[string][]*logInstance // container -> one per run
	ip       string
	initDone bool
	// phaseOverride is a terminal phase decided by the runner (init failure,
	// deadline, stop), with reason and message.
	phaseOverride   corev1.PodPhase
	reason, message string
	sandboxReady    bool
	stopping        bool
	stopReason      stopReason
	stopAt          time.Time // SIGKILL after this
	stopCh          chan struct{}
	done            chan struct{}
	removeWhenDone  bool
	// devices are the GPUs of each container that has some (allocateGPUs).
	devices map[string][]string

	sb *sandbox
}

type stopReason int

const (
	stopDeleted stopReason = iota + 1
	stopDeadline
	stopShutdown
)

// logInstance is the log of one run of a container.
type logInstance struct {
	path string
	done chan struct{}
	once sync.Once
}

func (l *logInstance) finish() { l.once.Do(func() { close(l.done) }) }

func (l *logInstance) finished() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

func newPodRun(p *Provider, pod *corev1.Pod) *podRun {
	r := &podRun{
		p:        p,
		key:      pod.Namespace + "/" + pod.Name,
		uid:      string(pod.UID),
		dir:      filepath.Join(p.cfg.StateDir, "pods", pod.Namespace+"_"+pod.Name+"_"+string(pod.UID)),
		pod:      pod.DeepCopy(),
		statuses: map[string]*corev1.ContainerStatus{},
		logs:     map[string][]*logInstance{},
		stopCh:   make(chan struct{}),
		done:     make(chan struct{}),
	}
	now := metav1.Now()
	r.pod.Status = corev1.PodStatus{
		Phase:     corev1.PodPending,
		HostIP:    p.cfg.HostIP,
		HostIPs:   []corev1.HostIP{{IP: p.cfg.HostIP}},
		StartTime: &now,
		QOSClass:  pod.Status.QOSClass,
	}
	for _, c := range pod.Spec.InitContainers {
		r.statuses[c.Name] = &corev1.ContainerStatus{Name: c.Name, Image: c.Image,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reasonPodInit}}}
	}
	for _, c := range pod.Spec.Containers {
		reason := reasonCreating
		if len(pod.Spec.InitContainers) > 0 {
			reason = reasonPodInit
		}
		r.statuses[c.Name] = &corev1.ContainerStatus{Name: c.Name, Image: c.Image,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}
	}
	return r
}

func (r *podRun) logf(format string, args ...interface{}) {
	r.p.logf("pod %s: %s", r.key, fmt.Sprintf(format, args...))
}

// stop asks the runner to end the pod: SIGTERM now, SIGKILL after grace.
func (r *podRun) stop(reason stopReason, grace time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at := time.Now().Add(grace)
	if r.stopping {
		if at.Before(r.stopAt) {
			r.stopAt = at // a shorter grace period wins, as in the kubelet
		}
		return
	}
	r.stopping, r.stopReason, r.stopAt = true, reason, at
	close(r.stopCh)
}

func (r *podRun) stopped() bool {
	select {
	case <-r.stopCh:
		return true
	default:
		return false
	}
}

// sleep waits d or until the pod is stopped; it reports whether d passed.
func (r *podRun) sleep(d time.Duration) bool {
	if d <= 0 {
		return !r.stopped()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.stopCh:
		return false
	}
}

// run is the pod's life on this node.
func (r *podRun) run(ctx context.Context) {
	defer close(r.done)
	defer r.finish()
	r.update(func() {})

	if err := os.MkdirAll(filepath.Join(r.dir, "logs"), 0o755); err != nil {
		r.fail(reasonSandboxFailed, err.Error())
		return
	}
	if snap := r.snapshot(); snap.Spec.ActiveDeadlineSeconds != nil {
		deadline := snap.Status.StartTime.Add(time.Duration(*snap.Spec.ActiveDeadlineSeconds) * time.Second)
		t := time.AfterFunc(time.Until(deadline), func() {
			r.mu.Lock()
			r.phaseOverride, r.reason, r.message = corev1.PodFailed, reasonDeadline, messageDeadline
			r.mu.Unlock()
			r.stop(stopDeadline, r.gracePeriod())
		})
		defer t.Stop()
	}

	// A pod the node refuses (its taints, its host paths) fails before it
	// gets anything.
	var refused *admissionError
	if err := admit(r.p.cfg, r.snapshot()); errors.As(err, &refused) {
		r.fail(refused.reason, refused.msg)
		return
	}

	if !r.allocateGPUs() {
		return
	}

	// The pod's environment, volumes and sandbox; a missing ConfigMap or Secret is
	// waited for, as by the kubelet.
	envs, argvs, spec, err := r.prepare(ctx)
	for err != nil {
		var ce *ConfigError
		if errors.As(err, &refused) {
			r.fail(refused.reason, refused.msg)
			return
		}
		if !errors.As(err, &ce) {
			r.fail(reasonUnsupported, err.Error())
			return
		}
		r.update(func() {
			for _, s := range r.statuses {
				s.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reasonConfigError, Message: err.Error()}}
			}
		})
		if !r.sleep(3 * time.Second) {
			return
		}
		envs, argvs, spec, err = r.prepare(ctx)
	}
	if err := r.startSandbox(spec); err != nil {
		r.fail(reasonSandboxFailed, err.Error())
		return
	}
	if r.p.tokens != nil {
		renewTokens(ctx, r.pod, r.p.tokens, projectedTokens(r.pod, r.dir), r.done, r.logf)
	}

	// Init containers, in order, each until it succeeds.
	for _, c := range r.pod.Spec.InitContainers {
		for {
			code, ok := r.runContainer(c, envs[c.Name], argvs[c.Name])
			if !ok {
				return
			}
			if code == 0 {
				break
			}
			if !ShouldRestartInit(r.pod.Spec.RestartPolicy, code) {
				r.mu.Lock()
				r.phaseOverride, r.reason, r.message = corev1.PodFailed, "", fmt.Sprintf("init container %s failed with exit code %d", c.Name, code)
				r.mu.Unlock()
				return
			}
			if !r.backoff(c.Name) {
				return
			}
		}
	}
	r.update(func() {
		r.initDone = true
		for _, c := range r.pod.Spec.Containers {
			r.statuses[c.Name].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reasonCreating}}
		}
	})

	var wg sync.WaitGroup
	for _, c := range r.pod.Spec.Containers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				code, ok := r.runContainer(c, envs[c.Name], argvs[c.Name])
				if !ok || !ShouldRestart(r.pod.Spec.RestartPolicy, code) {
					return
				}
				if !r.backoff(c.Name) {
					return
				}
			}
		}()
	}
	wg.Wait()
}

// gracePeriod is the pod's terminationGracePeriodSeconds.
func (r *podRun) gracePeriod() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if g := r.pod.Spec.TerminationGracePeriodSeconds; g != nil {
		return time.Duration(*g) * time.Second
	}
	return defaultGracePeriod
}

func ptrTo[T any](v T) *T { return &v }
