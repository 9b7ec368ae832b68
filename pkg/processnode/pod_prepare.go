package processnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// prepare resolves every container's environment and command and writes the volumes.
func (r *podRun) prepare(ctx context.Context) (map[string][]string, map[string][]string, sandboxSpec, error) {
	pod := r.snapshot()
	ref := PodRef{Pod: pod, HostIP: r.p.cfg.HostIP, NodeAllocatable: r.p.allocatable, DefaultEnv: r.p.cfg.DefaultEnv}
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
	r.mu.Lock()
	devices := r.devices
	r.mu.Unlock()
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
		env = visibleGPUEnv(env, devices[c.Name])
		argv, err := CommandLine(c, env)
		if err != nil {
			return nil, nil, sandboxSpec{}, err
		}
		envs[c.Name], argvs[c.Name] = env, argv
		if c.WorkingDir != "" {
			dirs = append(dirs, c.WorkingDir)
		}
	}
	paths, tmpfs, err := materializeVolumes(ctx, ref, r.dir, r.p.sources, r.p.tokens, r.p.cfg.AllowedHostPaths)
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
	mounts, err := mountPlan(pod, paths, envs, hosts, tmpfs)
	if err != nil {
		return nil, nil, sandboxSpec{}, err
	}
	hide := append(append([]string(nil), r.p.cfg.CredentialFiles...), r.p.cfg.TLSKeyFile)
	return envs, argvs, sandboxSpec{PodDir: r.dir, Hostname: PodHostname(pod), Mounts: mounts, Dirs: dirs, NewProc: true, Hide: hide}, nil
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
