package processnode

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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

	rootRel, err := prepareRoot(r.dir, &c)
	if err != nil {
		r.terminated(c.Name, exitCodeStartError, reasonStartError, err.Error(), time.Now())
		return exitCodeStartError, true
	}

	id := fmt.Sprintf("%s/%d", c.Name, run)
	events, err := sb.run(sbCommand{Op: "start", ID: id, Argv: argv, Env: env, Dir: c.WorkingDir, Root: rootRel, Log: logRel})
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
		// Without a probe the kubelet deems a running container ready.
		s.Ready, s.Started = tcpReadiness(&c) == nil, ptrTo(true)
	})
	if tcpReadiness(&c) != nil {
		probing := make(chan struct{})
		defer close(probing)
		go r.probeReadiness(c, id, probing)
	}

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
			msg := ""
			if code != 0 && c.TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError {
				msg = fallbackMessage(inst.path)
			}
			r.terminated(c.Name, code, reason, msg, started)
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

// Limits of a termination message taken from the log, as the kubelet's.
const (
	fallbackMaxLines = 80
	fallbackMaxBytes = 2048
)

// fallbackMessage is the termination message of a failed container whose
// terminationMessagePolicy is FallbackToLogsOnError: the end of its log, at
// most 80 lines and 2048 bytes. (The File policy, a message the container
// writes to terminationMessagePath, is not implemented.)
func fallbackMessage(logPath string) string {
	data, err := os.ReadFile(logPath)
	if err != nil {
		return ""
	}
	out := renderLog(tailEntries(parseLogData(data), fallbackMaxLines), LogOptions{})
	if len(out) > fallbackMaxBytes {
		out = out[len(out)-fallbackMaxBytes:]
	}
	return string(out)
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

// rootsDir holds, in a pod's directory, the root directory of each container
// that names no working directory.
const rootsDir = "roots"

// prepareRoot gives a container that names no working directory a root of
// its own in the pod directory, empty at each run as a fresh container's image
// root would be, so that relative paths (the SDK's script.py, the guide's
// ./data) stay in the pod. It returns the root relative to podDir, for the
// sandbox's start command; "" when the container names its working directory.
func prepareRoot(podDir string, c *corev1.Container) (string, error) {
	if c.WorkingDir != "" {
		return "", nil
	}
	rel := filepath.Join(rootsDir, c.Name)
	return rel, freshDir(filepath.Join(podDir, rel))
}

// freshDir makes dir an empty directory.
func freshDir(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("clearing the container's root directory: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating the container's root directory: %w", err)
	}
	return nil
}
