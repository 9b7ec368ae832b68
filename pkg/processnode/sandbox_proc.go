package processnode

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

type sandboxProc struct {
	out    *eventWriter
	podDir *os.File
	// rootsBase is the pod directory (O_PATH) as the pod's root sees it, for
	// the containers' root directories (see setupSandbox).
	rootsBase int
	logf      func(string, ...interface{})

	mu    sync.Mutex
	procs map[int]*sbProc // pid -> container process
}

type sbProc struct {
	id     string
	copies sync.WaitGroup
	log    *os.File
}

func (s *sandboxProc) handle(c sbCommand) {
	switch c.Op {
	case "start":
		pid, err := s.start(c)
		if err != nil {
			s.out.send(sbEvent{Op: "start-failed", ID: c.ID, Message: err.Error()})
			return
		}
		s.out.send(sbEvent{Op: "started", ID: c.ID, PID: pid})
	case "dial":
		go func() {
			ev := sbEvent{Op: "dialed", ID: c.ID}
			conn, err := net.DialTimeout("tcp", c.Addr, time.Duration(c.TimeoutMS)*time.Millisecond)
			if err != nil {
				ev.Code, ev.Message = 1, err.Error()
			} else {
				_ = conn.Close()
			}
			s.out.send(ev)
		}()
	case "signal":
		s.mu.Lock()
		for pid, p := range s.procs {
			if p.id == c.ID {
				_ = syscall.Kill(-pid, syscall.Signal(c.Signal))
			}
		}
		s.mu.Unlock()
	default:
		s.out.send(sbEvent{Op: "error", ID: c.ID, Message: "unknown op " + c.Op})
	}
}

// start runs one container process in its own process group, its stdout and
// stderr going to its log file.
func (s *sandboxProc) start(c sbCommand) (int, error) {
	if len(c.Argv) == 0 {
		return 0, fmt.Errorf("no command")
	}
	dir := c.Dir
	if dir == "" && c.Root != "" {
		// Through a descriptor of the pod directory: a volume may be mounted
		// over the state directory's path in this namespace. The child
		// inherits the descriptor until exec (O_CLOEXEC), and chdir to
		// /proc/self/fd/N runs in the child before exec.
		fd, err := unix.Openat(s.rootsBase, c.Root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return 0, fmt.Errorf("opening the container's root directory: %w", err)
		}
		defer func() { _ = unix.Close(fd) }()
		dir = "/proc/self/fd/" + strconv.Itoa(fd)
	}
	if dir == "" {
		dir = "/"
	}
	path, err := lookPath(c.Argv[0], c.Env, dir)
	if err != nil {
		return 0, err
	}
	fd, err := unix.Openat(int(s.podDir.Fd()), c.Log, unix.O_CREAT|unix.O_WRONLY|unix.O_APPEND|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return 0, fmt.Errorf("opening log: %w", err)
	}
	logFile := os.NewFile(uintptr(fd), c.Log)
	outR, outW, err := os.Pipe()
	if err != nil {
		_ = logFile.Close()
		return 0, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(logFile, outR, outW)
		return 0, err
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		closeAll(logFile, outR, outW, errR, errW)
		return 0, err
	}
	s.mu.Lock() // no reaping between fork and registration
	defer s.mu.Unlock()
	pid, err := syscall.ForkExec(path, c.Argv, &syscall.ProcAttr{
		Dir:   dir,
		Env:   c.Env,
		Files: []uintptr{devnull.Fd(), outW.Fd(), errW.Fd()},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	closeAll(devnull, outW, errW) // the child has its copies
	if err != nil {
		closeAll(outR, errR, logFile)
		if os.IsNotExist(err) && c.Dir != "" {
			if _, serr := os.Stat(dir); serr != nil {
				return 0, fmt.Errorf("chdir to working directory %q: %w", dir, serr)
			}
		}
		return 0, fmt.Errorf("exec %q: %w", c.Argv[0], err)
	}
	p := &sbProc{id: c.ID, log: logFile}
	lw := newLogWriter(logFile)
	p.copies.Add(2)
	go func() { defer p.copies.Done(); lw.copyStream("stdout", outR); _ = outR.Close() }()
	go func() { defer p.copies.Done(); lw.copyStream("stderr", errR); _ = errR.Close() }()
	s.procs[pid] = p
	return pid, nil
}

// reap collects every exited child: container processes are reported, orphans
// (their descendants, re-parented to PID 1) are just collected.
func (s *sandboxProc) reap() {
	for {
		var ws syscall.WaitStatus
		s.mu.Lock()
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err != nil || pid <= 0 {
			s.mu.Unlock()
			return
		}
		p, ok := s.procs[pid]
		delete(s.procs, pid)
		s.mu.Unlock()
		if !ok {
			continue
		}
		// A container ends with its main process: the rest of its group goes too.
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		ev := sbEvent{Op: "exited", ID: p.id}
		if ws.Signaled() {
			ev.Signal = int(ws.Signal())
		} else {
			ev.Code = ws.ExitStatus()
		}
		go func() {
			// Let the log copies drain; a descendant outside the group that still
			// holds the pipes does not hold up the exit.
			done := make(chan struct{})
			go func() { p.copies.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(2 * time.Second):
			}
			_ = p.log.Sync()
			_ = p.log.Close()
			s.out.send(ev)
		}()
	}
}

// killAll kills every other process of the PID namespace.
func (s *sandboxProc) killAll() {
	_ = syscall.Kill(-1, syscall.SIGKILL)
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.ECHILD {
			return
		}
		if pid <= 0 {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// lookPath finds argv0 as execve would after a PATH search with the container's PATH.
func lookPath(argv0 string, env []string, dir string) (string, error) {
	if strings.Contains(argv0, "/") {
		p := argv0
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if err := executable(p); err != nil {
			return "", fmt.Errorf("exec: %q: %w", argv0, err)
		}
		return p, nil
	}
	path := DefaultPath
	for _, kv := range env {
		if strings.HasPrefix(kv, "PATH=") {
			path = kv[len("PATH="):]
		}
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		p := filepath.Join(d, argv0)
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("exec: %q: executable file not found in $PATH", argv0)
}

func executable(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("permission denied")
	}
	return nil
}

// closeAll closes files whose close errors have nowhere to go (pipe ends and
// files given to a child, or closed on a path that fails anyway).
func closeAll(files ...*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}
