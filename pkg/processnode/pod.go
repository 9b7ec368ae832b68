package processnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
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
	phaseOverride         corev1.PodPhase
	reason, message       string
	sandboxReady          bool
	stopping              bool
	stopReason            stopReason
	stopAt                time.Time // SIGKILL after this
	stopCh                chan struct{}
	done                  chan struct{}
	removeWhenDone        bool
	deleteFromAPIWhenDone bool

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

	// The pod's environment, volumes and sandbox; a missing ConfigMap or Secret is
	// waited for, as by the kubelet.
	envs, argvs, spec, err := r.prepare(ctx)
	for err != nil {
		var ce *ConfigError
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

// prepare resolves every container's environment and command and writes the volumes.
func (r *podRun) prepare(ctx context.Context) (map[string][]string, map[string][]string, sandboxSpec, error) {
	pod := r.snapshot()
	ref := PodRef{Pod: pod, HostIP: r.p.cfg.HostIP, NodeAllocatable: r.p.allocatable}
	if !pod.Spec.HostNetwork {
		if r.ip == "" {
			ip, err := r.p.net.alloc.allocate()
			if err != nil {
				return nil, nil, sandboxSpec{}, err
			}
			r.mu.Lock()
			r.ip = ip
			r.mu.Unlock()
		}
		ref.PodIP = r.ip
	} else {
		ref.PodIP = r.p.cfg.HostIP
	}
	envs, argvs := map[string][]string{}, map[string][]string{}
	var dirs []string
	all := append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...)
	for i := range all {
		c := &all[i]
		if c.RestartPolicy != nil {
			return nil, nil, sandboxSpec{}, fmt.Errorf("init container %s: restartable (sidecar) init containers are not supported on a process node", c.Name)
		}
		env, err := ContainerEnv(ref, c, r.p.sources)
		if err != nil {
			return nil, nil, sandboxSpec{}, fmt.Errorf("container %s: %w", c.Name, err)
		}
		argv, err := CommandLine(c, env)
		if err != nil {
			return nil, nil, sandboxSpec{}, err
		}
		envs[c.Name], argvs[c.Name] = env, argv
		if c.WorkingDir != "" {
			dirs = append(dirs, c.WorkingDir)
		}
	}
	paths, tmpfs, err := materializeVolumes(ctx, ref, r.dir, r.p.sources, r.p.tokens)
	if err != nil {
		return nil, nil, sandboxSpec{}, err
	}
	hosts := ""
	if !pod.Spec.HostNetwork {
		hosts = filepath.Join(r.dir, "hosts")
		if err := writeInPlace(hosts, nil); err != nil {
			return nil, nil, sandboxSpec{}, err
		}
	}
	mounts, err := MountPlan(pod, paths, envs, hosts, tmpfs)
	if err != nil {
		return nil, nil, sandboxSpec{}, err
	}
	return envs, argvs, sandboxSpec{PodDir: r.dir, Hostname: PodHostname(pod), Mounts: mounts, Dirs: dirs, NewProc: true}, nil
}

// startSandbox starts the pod's namespaces and gives it its address and hosts entries.
func (r *podRun) startSandbox(spec sandboxSpec) error {
	pod := r.snapshot()
	// The hosts file lists the pod itself before any process can read it.
	if !pod.Spec.HostNetwork {
		e := HostEntry{UID: r.uid, Namespace: pod.Namespace, Hostname: PodHostname(pod), Subdomain: pod.Spec.Subdomain, IP: r.ip}
		if err := r.p.hosts.addLocal(e, filepath.Join(r.dir, "hosts")); err != nil {
			return err
		}
	}
	sb, err := startSandbox(r.p.cfg.SandboxBinary, spec, pod.Spec.HostNetwork, 30*time.Second)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.sb = sb
	r.mu.Unlock()
	if err := os.WriteFile(filepath.Join(r.dir, "sandbox.pid"), []byte(strconv.Itoa(sb.pid)), 0o644); err != nil {
		return err
	}
	if !pod.Spec.HostNetwork {
		if err := r.p.net.attach(sb.pid, r.uid, r.ip); err != nil {
			return err
		}
	}
	r.update(func() { r.sandboxReady = true })
	return nil
}

// runContainer runs container c once. ok is false when the pod was stopped or the
// sandbox is gone (the container's status then says how it ended).
func (r *podRun) runContainer(c corev1.Container, env, argv []string) (int32, bool) {
	if r.stopped() {
		return 0, false
	}
	r.mu.Lock()
	st := r.statuses[c.Name]
	run := st.RestartCount
	logRel := filepath.Join("logs", c.Name, strconv.Itoa(int(run))+".log")
	inst := &logInstance{path: filepath.Join(r.dir, logRel), done: make(chan struct{})}
	r.logs[c.Name] = append(r.logs[c.Name], inst)
	sb := r.sb
	r.mu.Unlock()
	defer inst.finish()
	if err := os.MkdirAll(filepath.Dir(inst.path), 0o755); err != nil {
		r.terminated(c.Name, exitCodeStartError, reasonStartError, err.Error(), time.Now())
		return exitCodeStartError, true
	}

	id := fmt.Sprintf("%s/%d", c.Name, run)
	events, err := sb.run(sbCommand{Op: "start", ID: id, Argv: argv, Env: env, Dir: c.WorkingDir, Log: logRel})
	if err != nil {
		r.terminated(c.Name, exitCodeStartError, reasonStartError, err.Error(), time.Now())
		return exitCodeStartError, !r.stopped()
	}
	defer sb.forget(id)
	var ev sbEvent
	select {
	case ev = <-events:
	case <-sb.done:
		r.terminated(c.Name, 137, reasonError, "the pod's sandbox exited", time.Now())
		return 137, false
	}
	if ev.Op == "start-failed" {
		r.terminated(c.Name, exitCodeStartError, reasonStartError, ev.Message, time.Now())
		return exitCodeStartError, !r.stopped()
	}
	started := time.Now()
	r.update(func() {
		s := r.statuses[c.Name]
		s.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}
		s.ContainerID = fmt.Sprintf("process://%s/%s", r.uid, id)
		s.Ready, s.Started = true, ptrTo(true)
	})

	termSent, killSent := false, false
	var killTimer <-chan time.Time
	stopCh := r.stopCh
	for {
		select {
		case ev = <-events:
			if ev.Op != "exited" {
				continue
			}
			code := exitStatus(ev.Code, ev.Signal)
			reason := reasonCompleted
			if code != 0 {
				reason = reasonError
			}
			r.terminated(c.Name, code, reason, "", started)
			return code, !r.stopped()
		case <-sb.done:
			r.terminated(c.Name, 137, reasonError, "the pod's sandbox exited", started)
			return 137, false
		case <-stopCh:
			stopCh = nil
			if !termSent {
				termSent = true
				_ = sb.signal(id, syscall.SIGTERM)
			}
			r.mu.Lock()
			at := r.stopAt
			r.mu.Unlock()
			killTimer = time.After(time.Until(at))
		case <-killTimer:
			if !killSent {
				killSent = true
				_ = sb.signal(id, syscall.SIGKILL)
			}
			killTimer = time.After(5 * time.Second)
		}
	}
}

// terminated records the end of a container's run.
func (r *podRun) terminated(name string, code int32, reason, message string, started time.Time) {
	r.update(func() {
		s := r.statuses[name]
		s.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: code, Reason: reason, Message: message,
			StartedAt: metav1.NewTime(started), FinishedAt: metav1.Now(), ContainerID: s.ContainerID,
		}}
		s.Ready = false
		s.Started = ptrTo(false)
	})
}

// backoff waits before the next run of a container, its status saying
// CrashLoopBackOff meanwhile; it reports false when the pod was stopped.
func (r *podRun) backoff(name string) bool {
	r.mu.Lock()
	s := r.statuses[name]
	var lastRun time.Duration
	if t := s.State.Terminated; t != nil {
		lastRun = t.FinishedAt.Sub(t.StartedAt.Time)
	}
	delay := RestartDelay(s.RestartCount, lastRun, r.p.cfg.BackoffBase, r.p.cfg.BackoffMax)
	r.mu.Unlock()
	r.update(func() {
		s := r.statuses[name]
		s.LastTerminationState = corev1.ContainerState{Terminated: s.State.Terminated}
		s.RestartCount++
		msg := fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", delay, name, r.pod.Name)
		s.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reasonCrashLoop, Message: msg}}
	})
	return r.sleep(delay)
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
