package processnode

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
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
	// Hide are the agent's credential files: each is covered, in the pod's
	// view, by an empty read-only file.
	Hide []string `json:"hide,omitempty"`
}

// mountSpec is one mount in the pod's mount namespace.
type mountSpec struct {
	Source string `json:"source,omitempty"` // host path; empty for a tmpfs
	// SubPath, when set, is what is mounted: a path below the directory
	// Source, resolved beneath it (openBeneath) when the mount is made.
	SubPath  string `json:"subPath,omitempty"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly,omitempty"`
	Tmpfs    bool   `json:"tmpfs,omitempty"`
	File     bool   `json:"file,omitempty"` // Source is a file
}

// sbCommand is one line the agent writes to the sandbox's stdin.
type sbCommand struct {
	Op   string   `json:"op"` // start, signal
	ID   string   `json:"id"`
	Argv []string `json:"argv,omitempty"`
	Env  []string `json:"env,omitempty"`
	Dir  string   `json:"dir,omitempty"`
	// Root, relative to PodDir, is the working directory when Dir is empty.
	Root   string `json:"root,omitempty"`
	Log    string `json:"log,omitempty"` // relative to PodDir
	Signal int    `json:"signal,omitempty"`
	// Addr and TimeoutMS are for "dial": a TCP probe from inside the pod's
	// network namespace (the host has no route to the pods).
	Addr      string `json:"addr,omitempty"`
	TimeoutMS int    `json:"timeoutMS,omitempty"`
}

// sbEvent is one line the sandbox writes to its stdout.
type sbEvent struct {
	Op      string `json:"op"` // ready, started, start-failed, exited, dialed, error
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
	rootsBase, err := setupSandbox(spec)
	if err != nil {
		out.send(sbEvent{Op: "error", Message: err.Error()})
		return 3
	}
	sb := &sandboxProc{out: out, podDir: podDir, rootsBase: rootsBase, procs: map[int]*sbProc{}, logf: logf}
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
