package processnode

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The sandbox is the first process of a pod (the agent binary again, started with
// SandboxEnv set): PID 1 of the pod's PID namespace, in the pod's own network, UTS,
// IPC and mount namespaces. It sets the hostname, mounts the pod's volumes and
// hosts file, then starts and reaps the pod's container processes on the agent's
// command. When it ends, the kernel kills every process left in the pod.

// SandboxEnv names the sandbox spec file for a sandbox process.
const SandboxEnv = "TRAINYARD_PROCESSNODE_SANDBOX"

// sandboxSpec is what the agent tells a sandbox to set up.
type sandboxSpec struct {
	PodDir   string      `json:"podDir"`
	Hostname string      `json:"hostname"`
	Mounts   []mountSpec `json:"mounts"`
	// Dirs must exist in the pod's view (working directories); missing ones are
	// created without touching the host.
	Dirs []string `json:"dirs"`
	// NewProc mounts a /proc of the pod's PID namespace.
	NewProc bool `json:"newProc"`
}

// mountSpec is one mount in the pod's mount namespace.
type mountSpec struct {
	Source   string `json:"source,omitempty"` // host path; empty for a tmpfs
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly,omitempty"`
	Tmpfs    bool   `json:"tmpfs,omitempty"`
	File     bool   `json:"file,omitempty"` // Source is a file
}

// sbCommand is one line the agent writes to the sandbox's stdin.
type sbCommand struct {
	Op     string   `json:"op"` // start, signal
	ID     string   `json:"id"`
	Argv   []string `json:"argv,omitempty"`
	Env    []string `json:"env,omitempty"`
	Dir    string   `json:"dir,omitempty"`
	Log    string   `json:"log,omitempty"` // relative to PodDir
	Signal int      `json:"signal,omitempty"`
}

// sbEvent is one line the sandbox writes to its stdout.
type sbEvent struct {
	Op      string `json:"op"` // ready, started, start-failed, exited, error
	ID      string `json:"id,omitempty"`
	PID     int    `json:"pid,omitempty"`
	Code    int    `json:"code,omitempty"`
	Signal  int    `json:"signal,omitempty"`
	Message string `json:"message,omitempty"`
}

// RunSandboxIfRequested turns this process into a pod sandbox when it was started
// as one (SandboxEnv set) and never returns then. Binaries that embed the agent
// (cmd/trainyard-node, tests) call it first thing in main or TestMain.
func RunSandboxIfRequested() {
	spec := os.Getenv(SandboxEnv)
	if spec == "" {
		return
	}
	os.Exit(sandboxMain(spec))
}

func sandboxMain(specPath string) int {
	logf := func(format string, args ...interface{}) {
		fmt.Fprintf(os.Stderr, "%s sandbox: %s\n", time.Now().Format(time.RFC3339Nano), fmt.Sprintf(format, args...))
	}
	b, err := os.ReadFile(specPath)
	if err != nil {
		logf("reading spec: %v", err)
		return 2
	}
	var spec sandboxSpec
	if err := json.Unmarshal(b, &spec); err != nil {
		logf("parsing spec: %v", err)
		return 2
	}
	out := &eventWriter{enc: json.NewEncoder(os.Stdout)}
	// Everything the pod writes into the state directory goes through this
	// descriptor, opened before any mount can hide the path.
	podDir, err := os.Open(spec.PodDir)
	if err != nil {
		out.send(sbEvent{Op: "error", Message: err.Error()})
		return 2
	}
	if err := setupSandbox(spec); err != nil {
		out.send(sbEvent{Op: "error", Message: err.Error()})
		return 3
	}
	sb := &sandboxProc{out: out, podDir: podDir, procs: map[int]*sbProc{}, logf: logf}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGCHLD, syscall.SIGTERM, syscall.SIGINT)
	out.send(sbEvent{Op: "ready"})

	cmds := make(chan sbCommand)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var c sbCommand
			if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
				out.send(sbEvent{Op: "error", Message: "bad command: " + err.Error()})
				continue
			}
			cmds <- c
		}
		close(cmds)
	}()
	for {
		select {
		case c, ok := <-cmds:
			if !ok { // the agent closed our stdin, or died
				sb.killAll()
				return 0
			}
			sb.handle(c)
		case s := <-sigs:
			if s == syscall.SIGCHLD {
				sb.reap()
				continue
			}
			sb.killAll()
			return 0
		}
	}
}

type eventWriter struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (w *eventWriter) send(e sbEvent) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_ = w.enc.Encode(e)
}

type sandboxProc struct {
	out    *eventWriter
	podDir *os.File
	logf   func(string, ...interface{})

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
		logFile.Close()
		return 0, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		logFile.Close()
		outR.Close()
		outW.Close()
		return 0, err
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
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
	devnull.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		logFile.Close()
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
	go func() { defer p.copies.Done(); lw.copyStream("stdout", outR); outR.Close() }()
	go func() { defer p.copies.Done(); lw.copyStream("stderr", errR); errR.Close() }()
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
			p.log.Close()
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

// setupSandbox sets the hostname and makes the pod's mounts. The mount namespace
// is already private (the agent starts us with CLONE_NEWNS, which makes "/"
// recursively private), so nothing here reaches the host.
func setupSandbox(spec sandboxSpec) error {
	if spec.Hostname != "" {
		if err := unix.Sethostname([]byte(spec.Hostname)); err != nil {
			return fmt.Errorf("sethostname: %w", err)
		}
	}
	m := &mounter{podDir: spec.PodDir, owned: map[string]bool{}}
	mounts := append([]mountSpec(nil), spec.Mounts...)
	// Parents before children.
	sort.SliceStable(mounts, func(i, j int) bool {
		return strings.Count(filepath.Clean(mounts[i].Target), "/") < strings.Count(filepath.Clean(mounts[j].Target), "/")
	})
	for _, mt := range mounts {
		if err := m.mount(mt); err != nil {
			return fmt.Errorf("mounting %s: %w", mt.Target, err)
		}
	}
	for _, d := range spec.Dirs {
		if err := m.ensure(filepath.Clean(d), false); err != nil {
			return fmt.Errorf("working directory %s: %w", d, err)
		}
	}
	if spec.NewProc {
		if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("mounting /proc: %w", err)
		}
	}
	return nil
}

// mounter makes mount points exist in the pod's view without creating anything on
// the host: a directory that needs a new entry is first "shadowed" by a tmpfs that
// holds bind mounts of all its entries (the root directory by pivoting into such a
// tmpfs), so the new entry lives in memory of this mount namespace only.
type mounter struct {
	podDir  string
	owned   map[string]bool // directories whose entries we may create
	shadows int
}

func (m *mounter) mount(mt mountSpec) error {
	target := filepath.Clean(mt.Target)
	if err := m.ensure(target, mt.File); err != nil {
		return err
	}
	if mt.Tmpfs {
		return unix.Mount("tmpfs", target, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0777")
	}
	if err := unix.Mount(mt.Source, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	if mt.ReadOnly {
		return unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_REC, "")
	}
	return nil
}

// mayCreateIn reports whether entries may be created in dir: a directory of ours
// (a shadow, or made in one) or in the state directory.
func (m *mounter) mayCreateIn(dir string) bool {
	if m.owned[dir] {
		return true
	}
	rel, err := filepath.Rel(m.podDir, dir)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// ensure makes path exist (a directory, or an empty file for file mounts).
func (m *mounter) ensure(path string, file bool) error {
	if st, err := os.Lstat(path); err == nil {
		if st.Mode()&os.ModeSymlink != 0 {
			if _, err := os.Stat(path); err == nil {
				return nil
			}
			return fmt.Errorf("%s is a dangling symlink", path)
		}
		return nil
	}
	parent := filepath.Dir(path)
	if err := m.ensure(parent, false); err != nil {
		return err
	}
	if !m.mayCreateIn(parent) {
		if err := m.shadow(parent); err != nil {
			return fmt.Errorf("shadowing %s: %w", parent, err)
		}
	}
	if file {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		return f.Close()
	}
	if err := os.Mkdir(path, 0o755); err != nil && !os.IsExist(err) {
		return err
	}
	m.owned[path] = true
	return nil
}

// shadow replaces dir, in this mount namespace, by a tmpfs holding bind mounts
// (recursive, so mounts below stay) of each of its entries.
func (m *mounter) shadow(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	staging := filepath.Join(m.podDir, "shadow", strconv.Itoa(m.shadows))
	m.shadows++
	if err := os.MkdirAll(staging, 0o700); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", staging, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("mode=%o", st.Mode().Perm())); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		src := filepath.Join(dir, e.Name())
		dst := filepath.Join(staging, e.Name())
		info, err := os.Lstat(src)
		if err != nil {
			continue // gone meanwhile
		}
		switch {
		case info.Mode()&os.ModeSymlink != 0:
			t, err := os.Readlink(src)
			if err != nil {
				return err
			}
			if err := os.Symlink(t, dst); err != nil {
				return err
			}
			continue
		case info.IsDir():
			if err := os.Mkdir(dst, info.Mode().Perm()); err != nil {
				return err
			}
		default:
			f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, info.Mode().Perm())
			if err != nil {
				return err
			}
			f.Close()
		}
		if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s: %w", src, err)
		}
	}
	if dir == "/" {
		old := filepath.Join(staging, ".oldroot")
		if err := os.Mkdir(old, 0o700); err != nil {
			return err
		}
		if err := unix.PivotRoot(staging, old); err != nil {
			return fmt.Errorf("pivot_root: %w", err)
		}
		if err := unix.Chdir("/"); err != nil {
			return err
		}
		if err := unix.Unmount("/.oldroot", unix.MNT_DETACH); err != nil {
			return err
		}
		_ = os.Remove("/.oldroot")
	} else if err := unix.Mount(staging, dir, "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("moving shadow onto %s: %w", dir, err)
	}
	m.owned[dir] = true
	return nil
}
