package processnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/trainyard/trainyard/pkg/processnode/gpus"
)

// GPUCheck runs the GPU path of a process node on this machine without an API
// server: discovery with nvidia-smi, the allocator and its state file, and the
// commands of a pod that asks for GPUs and of one that asks for none, each in a
// sandbox as the agent starts it, with the environment the agent gives it. It
// is for a machine with GPUs that cannot run a whole local cluster (no Go, no
// network, little room: test/gpucheck). The pods share the host's network
// (hostNetwork), so neither veths nor iproute2 are needed.
type GPUCheck struct {
	// NvidiaSMI as Config.NvidiaSMI ("" looks for it as the agent does).
	NvidiaSMI string
	// StateDir holds the allocator's state file and the pods' directories.
	StateDir string
	// SandboxBinary is started as each pod's sandbox; default: this executable
	// (which must call RunSandboxIfRequested first).
	SandboxBinary string
	// GPUs is what the GPU pod's container asks for (default 1).
	GPUs int
	// GPUCommand and CPUCommand are the containers' commands; an empty
	// CPUCommand skips the CPU pod.
	GPUCommand, CPUCommand []string
	// WorkingDir of both containers; "" gives each a root of its own.
	WorkingDir string
	// Env is set in both containers, after DefaultEnv (as Config.DefaultEnv).
	Env, DefaultEnv []corev1.EnvVar
	// Out receives what the check finds and the pods' logs.
	Out io.Writer
}

// Run runs the check; it fails when no GPU is found, an allocation is wrong,
// or a pod's command fails.
func (g GPUCheck) Run(ctx context.Context) error {
	if g.GPUs == 0 {
		g.GPUs = 1
	}
	if g.SandboxBinary == "" {
		var err error
		if g.SandboxBinary, err = os.Executable(); err != nil {
			return err
		}
	}
	say := func(format string, args ...interface{}) { _, _ = fmt.Fprintf(g.Out, format+"\n", args...) }
	list, err := discoverGPUs(ctx, g.NvidiaSMI, say)
	if err != nil {
		return err
	}
	if len(list) == 0 {
		return errors.New("no GPUs found")
	}
	labels := gpus.Labels(list)
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		say("node label %s=%s", k, labels[k])
	}
	if err := os.MkdirAll(g.StateDir, 0o755); err != nil {
		return err
	}
	alloc, notes, err := newGPUAllocator(filepath.Join(g.StateDir, gpuStateFile), list)
	if err != nil {
		return err
	}
	for _, n := range notes {
		say("allocator: %s", n)
	}

	gpuPod := checkPod("gpu-check-gpu", g.GPUs)
	devices, err := alloc.allocate(gpuPod)
	if err != nil {
		return fmt.Errorf("allocating %d GPU(s): %w", g.GPUs, err)
	}
	defer func() { _ = alloc.release(string(gpuPod.UID)) }()
	say("pod %s was given %s", gpuPod.Name, strings.Join(devices["node"], ","))
	if len(devices["node"]) != g.GPUs {
		return fmt.Errorf("pod %s asked for %d GPU(s) and was given %v", gpuPod.Name, g.GPUs, devices["node"])
	}
	// A second pod never gets the first one's GPUs, and gets none when none are left.
	other := checkPod("gpu-check-other", 1)
	more, err := alloc.allocate(other)
	switch {
	case err != nil && len(list) > g.GPUs:
		return fmt.Errorf("a second pod found no free GPU of %d: %w", len(list), err)
	case err != nil:
		say("a second pod asking for 1 GPU is refused, none being free: %v", err)
	default:
		say("a second pod asking for 1 GPU was given %s", strings.Join(more["node"], ","))
		if slices.Contains(devices["node"], more["node"][0]) {
			return fmt.Errorf("two pods share GPU %s", more["node"][0])
		}
		if err := alloc.release(string(other.UID)); err != nil {
			return err
		}
	}

	failed := g.runPod(ctx, gpuPod, devices["node"], g.GPUCommand, say)
	if len(g.CPUCommand) > 0 {
		cpuPod := checkPod("gpu-check-cpu", 0)
		if d, err := alloc.allocate(cpuPod); err != nil || len(d) > 0 {
			return fmt.Errorf("a pod asking for no GPU was given %v (%v)", d, err)
		}
		failed = errors.Join(failed, g.runPod(ctx, cpuPod, nil, g.CPUCommand, say))
	}
	return failed
}

// checkPod is a pod whose container "node" asks for n GPUs.
func checkPod(name string, n int) *corev1.Pod {
	c := corev1.Container{Name: "node"}
	if n > 0 {
		q := *resource.NewQuantity(int64(n), resource.DecimalSI)
		c.Resources.Limits = corev1.ResourceList{gpus.Resource: q}
		c.Resources.Requests = corev1.ResourceList{gpus.Resource: q}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "gpu-check", Name: name, UID: types.UID(name + "-" + fmt.Sprint(time.Now().UnixNano()))},
		Spec:       corev1.PodSpec{NodeName: "gpu-check", HostNetwork: true, Containers: []corev1.Container{c}},
	}
}

// runPod runs the pod's one container in a sandbox to its end and shows its log.
func (g GPUCheck) runPod(ctx context.Context, pod *corev1.Pod, uuids, command []string, say func(string, ...interface{})) error {
	c := &pod.Spec.Containers[0]
	c.Command, c.WorkingDir = command, g.WorkingDir
	c.Env = g.Env
	ref := PodRef{Pod: pod, PodIP: "127.0.0.1", HostIP: "127.0.0.1", DefaultEnv: g.DefaultEnv}
	env, err := ContainerEnv(ref, c, noSources{})
	if err != nil {
		return err
	}
	env = visibleGPUEnv(env, uuids)
	argv, err := CommandLine(c, env)
	if err != nil {
		return err
	}
	dir := filepath.Join(g.StateDir, "pods", pod.Name)
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	logRel := filepath.Join("logs", c.Name, "0.log")
	if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(logRel)), 0o755); err != nil {
		return err
	}
	rootRel, err := prepareRoot(dir, c)
	if err != nil {
		return err
	}
	for _, kv := range env {
		if strings.HasSuffix(strings.SplitN(kv, "=", 2)[0], "_VISIBLE_DEVICES") {
			say("pod %s: %s", pod.Name, kv)
		}
	}
	say("pod %s: running %q", pod.Name, argv)
	start := time.Now()
	sb, err := startSandbox(g.SandboxBinary, sandboxSpec{PodDir: dir, Hostname: pod.Name, NewProc: true}, true, 30*time.Second)
	if err != nil {
		return fmt.Errorf("pod %s: %w", pod.Name, err)
	}
	defer sb.stop()
	events, err := sb.run(sbCommand{Op: "start", ID: "node/0", Argv: argv, Env: env, Dir: c.WorkingDir, Root: rootRel, Log: logRel})
	if err != nil {
		return fmt.Errorf("pod %s: %w", pod.Name, err)
	}
	code := -1
	for code < 0 {
		select {
		case ev := <-events:
			switch ev.Op {
			case "start-failed":
				return fmt.Errorf("pod %s: %s", pod.Name, ev.Message)
			case "exited":
				code = int(exitStatus(ev.Code, ev.Signal))
			}
		case <-sb.done:
			return fmt.Errorf("pod %s: the sandbox exited", pod.Name)
		case <-ctx.Done():
			_ = sb.signal("node/0", syscall.SIGKILL)
			return fmt.Errorf("pod %s: %w", pod.Name, ctx.Err())
		}
	}
	// "exited" comes once the sandbox has drained and closed the log.
	data, err := os.ReadFile(filepath.Join(dir, logRel))
	if err != nil {
		return err
	}
	for _, line := range strings.SplitAfter(string(renderLog(parseLogData(data), LogOptions{})), "\n") {
		if line != "" {
			_, _ = fmt.Fprintf(g.Out, "[%s] %s", pod.Name, line)
		}
	}
	say("pod %s: exit code %d after %.1fs", pod.Name, code, time.Since(start).Seconds())
	if code != 0 {
		return fmt.Errorf("pod %s: exit code %d", pod.Name, code)
	}
	return nil
}

// noSources resolves no ConfigMap or Secret: the check's pods refer to none.
type noSources struct{}

func (noSources) ConfigMap(_, name string) (*corev1.ConfigMap, error) {
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}

func (noSources) Secret(_, name string) (*corev1.Secret, error) {
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}
