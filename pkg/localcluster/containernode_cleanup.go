package localcluster

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// cgroupV1Mounts returns the mount points of the cgroup v1 hierarchies
// (/sys/fs/cgroup/cpu,cpuacct, ...).
func cgroupV1Mounts() []string {
	var out []string
	for _, m := range mountInfo() {
		if m.fstype == "cgroup" {
			out = append(out, m.point)
		}
	}
	return out
}

// makeCgroupRoot creates a kubelet's cgroupRoot in every v1 hierarchy (the
// kubelet insists that it exists), with the cpusets of the hierarchy's root.
func makeCgroupRoot(root string) error {
	for _, m := range cgroupV1Mounts() {
		d := filepath.Join(m, root)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("creating cgroup %s: %w", d, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if b, err := os.ReadFile(filepath.Join(m, f)); err == nil {
				_ = os.WriteFile(filepath.Join(d, f), b, 0o644)
			}
		}
	}
	return nil
}

// removeCgroupRoot removes a cgroup root and everything below it, deepest first.
func removeCgroupRoot(root string) error {
	var errs []error
	for _, m := range cgroupV1Mounts() {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(m, root), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		slices.Reverse(dirs)
		for _, d := range dirs {
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

type mount struct{ point, fstype string }

// mountInfo lists this process's mounts (/proc/self/mountinfo).
func mountInfo() []mount {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer func() { _ = f.Close() }()
	var ms []mount
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		i := slices.Index(fs, "-")
		if len(fs) < 5 || i < 0 || i+1 >= len(fs) {
			continue
		}
		ms = append(ms, mount{point: unescapeMount(fs[4]), fstype: fs[i+1]})
	}
	return ms
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space, ...).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// cleanupContainerNodes removes what the container nodes of stateDir left on
// the host once their containerd and kubelet are gone: the containers
// (runc delete --force), their shims, the pods' network namespaces, every
// mount under the nodes' directories, the bridges, the cgroup roots and the
// cluster network's iptables rules (cleanupClusterNetwork), and gives up
// the cluster's claim on the host (releaseHost). It
// does nothing for a cluster without container nodes.
func cleanupContainerNodes(stateDir string) error {
	defer releaseHost(stateDir)
	entries, err := os.ReadDir(filepath.Join(stateDir, "container-nodes"))
	if err != nil {
		return nil // none
	}
	var errs []error
	for _, e := range entries {
		i, err := strconv.Atoi(e.Name())
		if err != nil || !e.IsDir() {
			continue
		}
		errs = append(errs, cleanupContainerNode(stateDir, i))
	}
	errs = append(errs, cleanupClusterNetwork(stateDir))
	return errors.Join(errs...)
}

func cleanupContainerNode(stateDir string, i int) error {
	dir := containerNodeDir(stateDir, i)
	cd := filepath.Join(dir, "containerd")
	var errs []error
	// The network namespaces the sandboxes were given (containerd 1.6 mounts
	// them under /var/run/netns), from the OCI specs of the bundles.
	bundles, _ := filepath.Glob(filepath.Join(cd, "state", "io.containerd.runtime.v2.task", "*", "*", "config.json"))
	var netns []string
	for _, b := range bundles {
		var spec struct {
			Linux struct {
				Namespaces []struct{ Type, Path string }
			}
		}
		if data, err := os.ReadFile(b); err == nil && json.Unmarshal(data, &spec) == nil {
			for _, ns := range spec.Linux.Namespaces {
				if ns.Type == "network" && strings.HasPrefix(ns.Path, "/var/run/netns/") {
					netns = append(netns, ns.Path)
				}
			}
		}
	}
	// The containers: runc's state of this node's containerd is under its own root.
	roots, _ := filepath.Glob(filepath.Join(cd, "runc", "*"))
	for _, root := range roots {
		ids, _ := os.ReadDir(root)
		for _, id := range ids {
			if out, err := exec.Command("runc", "--root", root, "delete", "--force", id.Name()).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("runc delete %s: %w: %s", id.Name(), err, strings.TrimSpace(string(out))))
			}
		}
	}
	// The shims outlive containerd; each names its containerd's socket.
	socket := filepath.Join(cd, "containerd.sock")
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) > 0 && strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") && slices.Contains(args, socket) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	for _, ns := range netns {
		_ = syscall.Unmount(ns, syscall.MNT_DETACH)
		_ = os.Remove(ns)
	}
	// Mounts under the node's directory (rootfs overlays, shm, the kubelet's
	// volumes), deepest first.
	var points []string
	for _, m := range mountInfo() {
		if strings.HasPrefix(m.point, dir+"/") {
			points = append(points, m.point)
		}
	}
	slices.SortFunc(points, func(a, b string) int { return len(b) - len(a) })
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
		}
	}
	if br := containerBridge(stateDir, i); linkExists(br) {
		if out, err := exec.Command("ip", "link", "delete", br).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("ip link delete %s: %w: %s", br, err, strings.TrimSpace(string(out))))
		}
	}
	errs = append(errs, removeCgroupRoot(containerCgroupRoot(stateDir, i)))
	return errors.Join(errs...)
}

func linkExists(name string) bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", name))
	return err == nil
}
