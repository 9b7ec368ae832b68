package processnode

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// sandbox is the agent's handle on a pod's sandbox process.
type sandbox struct {
	cmd   *exec.Cmd
	pid   int // in the host's PID namespace
	stdin io.WriteCloser

	mu      sync.Mutex
	waiters map[string]chan sbEvent // container run id -> its events
	done    chan struct{}           // the sandbox exited
	err     error
}

// startSandbox starts the sandbox process for a pod and waits until its mounts are
// made. hostNetwork pods share the host's network (and hosts file).
func startSandbox(binary string, spec sandboxSpec, hostNetwork bool, timeout time.Duration) (*sandbox, error) {
	specPath := filepath.Join(spec.PodDir, "sandbox.json")
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(specPath, b, 0o600); err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(filepath.Join(spec.PodDir, "sandbox.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer func() { _ = logFile.Close() }() // the sandbox has its own copy
	cmd := exec.Command(binary)
	cmd.Env = []string{SandboxEnv + "=" + specPath, "PATH=" + DefaultPath}
	cmd.Dir = "/"
	cmd.Stderr = logFile
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	clone := uintptr(syscall.CLONE_NEWPID | syscall.CLONE_NEWUTS | syscall.CLONE_NEWIPC)
	if !hostNetwork {
		clone |= syscall.CLONE_NEWNET
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: clone,
		// Unshared (not cloned) so that the Go runtime makes "/" recursively
		// private in the child: no mount of the pod reaches the host.
		Unshareflags: syscall.CLONE_NEWNS,
		Setsid:       true,
		// The pod dies with the agent, however the agent dies.
		Pdeathsig: syscall.SIGKILL,
	}
	if err := onSpawnThread(cmd.Start); err != nil {
		return nil, fmt.Errorf("starting sandbox: %w", err)
	}
	s := &sandbox{cmd: cmd, pid: cmd.Process.Pid, stdin: stdin, waiters: map[string]chan sbEvent{}, done: make(chan struct{})}
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		readySent := false
		for sc.Scan() {
			var ev sbEvent
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				continue
			}
			switch {
			case ev.Op == "ready":
				readySent = true
				ready <- nil
			case ev.Op == "error" && !readySent:
				readySent = true
				ready <- errors.New(ev.Message)
			case ev.ID != "":
				s.mu.Lock()
				ch := s.waiters[ev.ID]
				s.mu.Unlock()
				if ch != nil {
					ch <- ev
				}
			}
		}
		err := cmd.Wait()
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
		if !readySent {
			ready <- fmt.Errorf("sandbox exited while starting (%v); see %s", err, filepath.Join(spec.PodDir, "sandbox.log"))
		}
		close(s.done)
	}()
	select {
	case err := <-ready:
		if err != nil {
			s.stop()
			return nil, err
		}
	case <-time.After(timeout):
		s.stop()
		return nil, fmt.Errorf("sandbox not ready after %s", timeout)
	}
	return s, nil
}

// run starts one container process; events receives "started" or "start-failed",
// then "exited". It is buffered, so the reader never holds the sandbox up.
func (s *sandbox) run(c sbCommand) (<-chan sbEvent, error) {
	ch := make(chan sbEvent, 4)
	s.mu.Lock()
	s.waiters[c.ID] = ch
	s.mu.Unlock()
	if err := s.send(c); err != nil {
		s.forget(c.ID)
		return nil, err
	}
	return ch, nil
}

func (s *sandbox) forget(id string) {
	s.mu.Lock()
	delete(s.waiters, id)
	s.mu.Unlock()
}

func (s *sandbox) signal(id string, sig syscall.Signal) error {
	return s.send(sbCommand{Op: "signal", ID: id, Signal: int(sig)})
}

func (s *sandbox) send(c sbCommand) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.done:
		return errors.New("sandbox has exited")
	default:
	}
	_, err = s.stdin.Write(append(b, '\n'))
	return err
}

// stop ends the sandbox, and with it every process left in the pod.
func (s *sandbox) stop() {
	_ = s.stdin.Close()
	select {
	case <-s.done:
		return
	case <-time.After(3 * time.Second):
	}
	_ = syscall.Kill(s.pid, syscall.SIGKILL)
	<-s.done
}

var (
	spawnOnce sync.Once
	spawnCh   chan func()
)

// onSpawnThread runs f on one OS thread that lives as long as the process, so that
// Pdeathsig (which follows the thread that forked) fires only when the agent dies.
func onSpawnThread(f func() error) error {
	spawnOnce.Do(func() {
		spawnCh = make(chan func())
		go func() {
			runtime.LockOSThread()
			for f := range spawnCh {
				f()
			}
		}()
	})
	var err error
	done := make(chan struct{})
	spawnCh <- func() { defer close(done); err = f() }
	<-done
	return err
}
