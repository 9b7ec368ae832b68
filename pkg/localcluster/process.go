package localcluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// stopGrace is how long a component gets between SIGTERM and SIGKILL.
const stopGrace = 10 * time.Second

// Process is one started component, as recorded in StateDir/state.json.
type Process struct {
	Name string `json:"name"`
	PID  int    `json:"pid"`
	// StartTime is field 22 of /proc/PID/stat (clock ticks after boot). Together with
	// PID it identifies the process, so that a recycled PID is never signalled.
	StartTime uint64   `json:"startTime"`
	Seq       int      `json:"seq"` // start order; stopping goes from the highest down
	Args      []string `json:"args"`
	Log       string   `json:"log"`
}

// procState reports whether pid is a live (not zombie) process with the given start
// time. startTime 0 matches any.
func procAlive(pid int, startTime uint64) bool {
	st, state, err := readStat(pid)
	if err != nil {
		return false
	}
	if state == 'Z' || state == 'X' || state == 'x' {
		return false
	}
	return startTime == 0 || st == startTime
}

// readStat returns the start time and state letter of a process from /proc.
func readStat(pid int) (uint64, byte, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// The command name (field 2) is in parentheses and may contain spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	fields := strings.Fields(string(b[i+2:]))
	// fields[0] is field 3 (state); field 22 is fields[19].
	if len(fields) < 20 {
		return 0, 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	st, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return 0, 0, err
	}
	return st, fields[0][0], nil
}

// stopProcess sends SIGTERM, waits up to grace, then SIGKILLs and waits for the
// process to be gone (a zombie counts as gone). It never signals a process whose
// start time differs from the recorded one.
func stopProcess(p Process, sig syscall.Signal, grace time.Duration) error {
	if !procAlive(p.PID, p.StartTime) {
		return nil
	}
	if err := syscall.Kill(p.PID, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signalling %s (pid %d): %w", p.Name, p.PID, err)
	}
	if waitGone(p, grace) {
		return nil
	}
	if procAlive(p.PID, p.StartTime) {
		_ = syscall.Kill(p.PID, syscall.SIGKILL)
	}
	if !waitGone(p, 5*time.Second) {
		return fmt.Errorf("%s (pid %d) survived SIGKILL", p.Name, p.PID)
	}
	return nil
}

func waitGone(p Process, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if !procAlive(p.PID, p.StartTime) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// state is what StateDir/state.json holds: enough for another process (the
// trainyard-local command's down and status) to find and stop the components.
type state struct {
	Ports     Ports     `json:"ports"`
	Processes []Process `json:"processes"`
	NextSeq   int       `json:"nextSeq"`
	// KueueFrameworks and ManagerArgs are what Kueue and the manager currently run with.
	KueueFrameworks []string `json:"kueueFrameworks"`
	ManagerArgs     []string `json:"managerArgs"`
}

const stateFile = "state.json"

func readState(dir string) (*state, error) {
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, err
	}
	var s state
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("parsing %s: %w", filepath.Join(dir, stateFile), err)
	}
	return &s, nil
}

func writeState(dir string, s *state) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, stateFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, stateFile))
}

// supervisor starts components and keeps state.json current.
type supervisor struct {
	dir string
	env []string

	logf   func(format string, args ...interface{}) // optional progress
	detach bool                                     // let components outlive this process

	mu    sync.Mutex
	st    *state
	exits map[int]chan struct{} // pid -> closed when our child has exited (and was reaped)
}

// start launches a component detached from our session (so it outlives the
// trainyard-local command and a Ctrl-C in its terminal), with stdout and stderr
// appended to logs/NAME.log, and records it.
func (s *supervisor) start(name string, argv []string, unshareMount bool) (Process, error) {
	return s.startWith(name, argv, unshareMount, syscall.SIGKILL)
}

// startWith is start with the signal the component gets when the calling process
// dies (not detached): SIGKILL, or SIGTERM for components that must clean up after
// themselves (the process node agents remove their pods' namespaces and veths).
func (s *supervisor) startWith(name string, argv []string, unshareMount bool, deathSignal syscall.Signal) (Process, error) {
	logPath := filepath.Join(s.dir, "logs", name+".log")
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return Process{}, err
	}
	defer func() { _ = lf.Close() }() // the component has its own copy
	fmt.Fprintf(lf, "==== %s starting: %s\n", time.Now().Format(time.RFC3339), strings.Join(argv, " "))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = s.dir
	cmd.Env = s.env
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if unshareMount {
		// A private mount namespace: the Go runtime also makes / recursively private in
		// the child before exec, so mounts made in it never reach the host.
		cmd.SysProcAttr.Unshareflags = syscall.CLONE_NEWNS
	}
	var err2 error
	if s.detach {
		err2 = cmd.Start()
	} else {
		// SIGKILL when we die, however we die (a test binary killed by its timeout
		// runs no cleanup). The signal follows the thread that forked, hence the
		// dedicated thread.
		cmd.SysProcAttr.Pdeathsig = deathSignal
		onSpawnThread(func() { err2 = cmd.Start() })
	}
	if err2 != nil {
		return Process{}, fmt.Errorf("starting %s: %w", name, err2)
	}
	pid := cmd.Process.Pid
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }() // reap: never leave a zombie behind
	st, _, err := readStat(pid)
	if err != nil {
		// Exited already; keep going so the caller's readiness check reports the log.
		st = 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.exits[pid] = done
	p := Process{Name: name, PID: pid, StartTime: st, Seq: s.st.NextSeq, Args: argv, Log: logPath}
	s.st.NextSeq++
	s.st.Processes = append(s.st.Processes, p)
	return p, writeState(s.dir, s.st)
}

var (
	spawnOnce sync.Once
	spawnCh   chan func()
)

// onSpawnThread runs f on one OS thread that lives as long as the process: the
// goroutine that owns it locks it and never returns, so the kernel never sees the
// parent thread of our children exit before the process does (Pdeathsig).
func onSpawnThread(f func()) {
	spawnOnce.Do(func() {
		spawnCh = make(chan func())
		go func() {
			runtime.LockOSThread()
			for f := range spawnCh {
				f()
			}
		}()
	})
	done := make(chan struct{})
	spawnCh <- func() { defer close(done); f() }
	<-done
}

// exited reports whether a process this supervisor started has exited.
func (s *supervisor) exited(p Process) bool {
	s.mu.Lock()
	ch, ok := s.exits[p.PID]
	s.mu.Unlock()
	if !ok {
		return !procAlive(p.PID, p.StartTime)
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// stop stops one recorded process and forgets it.
func (s *supervisor) stop(p Process, sig syscall.Signal, grace time.Duration) error {
	err := stopProcess(p, sig, grace)
	s.mu.Lock()
	if ch, ok := s.exits[p.PID]; ok {
		s.mu.Unlock()
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
		}
		s.mu.Lock()
		delete(s.exits, p.PID)
	}
	defer s.mu.Unlock()
	if err != nil {
		return err
	}
	kept := s.st.Processes[:0]
	for _, q := range s.st.Processes {
		if q.PID != p.PID || q.Seq != p.Seq {
			kept = append(kept, q)
		}
	}
	s.st.Processes = kept
	return writeState(s.dir, s.st)
}

// find returns the recorded process called name.
func (s *supervisor) find(name string) (Process, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.st.Processes {
		if p.Name == name {
			return p, true
		}
	}
	return Process{}, false
}

// stopAll stops every recorded process, newest first.
func (s *supervisor) stopAll() error {
	var errs []error
	for {
		s.mu.Lock()
		var newest *Process
		for i := range s.st.Processes {
			if newest == nil || s.st.Processes[i].Seq > newest.Seq {
				newest = &s.st.Processes[i]
			}
		}
		var p Process
		if newest != nil {
			p = *newest
		}
		s.mu.Unlock()
		if newest == nil {
			break
		}
		start := time.Now()
		err := s.stop(p, syscall.SIGTERM, stopGrace)
		if s.logf != nil {
			s.logf("stopped %s (pid %d) in %s", p.Name, p.PID, time.Since(start).Round(10*time.Millisecond))
		}
		if err != nil {
			errs = append(errs, err)
			// Forget it anyway so that the loop ends; the error is reported.
			s.mu.Lock()
			kept := s.st.Processes[:0]
			for _, q := range s.st.Processes {
				if q.Seq != p.Seq {
					kept = append(kept, q)
				}
			}
			s.st.Processes = kept
			_ = writeState(s.dir, s.st)
			s.mu.Unlock()
		}
	}
	// The containers of container nodes outlive their containerd.
	errs = append(errs, cleanupContainerNodes(s.dir))
	return errors.Join(errs...)
}
