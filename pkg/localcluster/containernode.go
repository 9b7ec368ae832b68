package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Container nodes (Options.ContainerNodes): real kubelets whose pods run in
// real containers. Each node has its own containerd (own root, state and
// socket under ContainerNodeDir, CRI plugin with the overlayfs snapshotter
// and runc with cgroupfs), its own CNI bridge and /24 out of
// ContainerPodCIDR (10.253.i.0/24 for node i: bridge, host-local IPAM with
// its state under the node's directory, portmap; containerd adds loopback),
// and its own kubelet: registered as container-node-i with the label
// trainyard.io/pool=container, a client certificate of the cluster CA in
// group system:nodes (the Node authorizer), a serving certificate of the CA
// for the node's IP (the API server checks it: kubectl logs and exec go
// API server → kubelet), webhook authentication and authorization, the
// node's containerd as its runtime, pods' cgroups under a cgroup root of its
// own, and cgroup v1 allowed (failCgroupV1: false).
//
// The kubelet refuses a loopback node IP, so the nodes take a host-only
// address, NodeAddress on an interface of the cluster's own
// (containernode_network.go), and their kubelet API listens there, each on a
// port of its own (client certificates of the cluster CA only).
// The sandbox image is cmd/pause, built and imported into each containerd
// at start: images are never pulled; put images into a node with
// ImportImage (ContainerNodeSocket) and use imagePullPolicy: Never.
//
// Down removes what the containers leave behind once the components have
// stopped: runc containers, shims, mounts, network namespaces, the bridges
// and the cgroups (cleanupContainerNodes).
const (
	ContainerPodCIDR = "10.253.0.0/16"
	// ContainerNodePool is the trainyard.io/pool label of the container nodes.
	ContainerNodePool = "container"
	// ClusterDNS and the default cluster domain (runtime.DefaultClusterDomain,
	// the manager's default --cluster-domain) are what the kubelets put into
	// pods' resolv.conf; CoreDNS answers there (containernode_dns.go).
	ClusterDNS = "10.0.0.10"
	// Containerd and Kubelet are the component names of node i's processes:
	// logs/containerd-<i>.log and logs/kubelet-<i>.log.
	Containerd       = "containerd"
	Kubelet          = "kubelet"
	containerNodeFmt = "container-node-%d"
)

// ContainerNodeName is the Node name of container node i.
func ContainerNodeName(i int) string { return fmt.Sprintf(containerNodeFmt, i) }

// ContainerNodeDir holds everything of container node i: containerd's root
// and state, the kubelet's root, configuration and certificates.
func (c *Cluster) ContainerNodeDir(i int) string { return containerNodeDir(c.o.StateDir, i) }

func containerNodeDir(stateDir string, i int) string {
	return filepath.Join(stateDir, "container-nodes", fmt.Sprint(i))
}

// ContainerNodeSocket is the socket of container node i's containerd (for
// ctr --address, ImportImage).
func (c *Cluster) ContainerNodeSocket(i int) string {
	return filepath.Join(c.ContainerNodeDir(i), "containerd", "containerd.sock")
}

// ContainerNodeLogs are the log files of container node i: containerd's, the kubelet's.
func (c *Cluster) ContainerNodeLogs(i int) (containerd, kubelet string) {
	return c.LogFile(fmt.Sprintf("%s-%d", Containerd, i)), c.LogFile(fmt.Sprintf("%s-%d", Kubelet, i))
}

// containerNode is what Up chose for node i.
type containerNode struct {
	ip                  string // the node IP: the host's
	kubeletPort, health int
	cgroupRoot          string
	bridge, podCIDR     string
}

// ContainerNodePrerequisites reports what the container nodes need and this
// machine lacks, each with its fix; nil when nothing is missing.
func ContainerNodePrerequisites() []error {
	var errs []error
	fix := "run " + ContainerNodePackagesScript + " (as root)"
	for _, p := range []string{"containerd", "containerd-shim-runc-v2", "ctr", "runc", "iptables"} {
		if _, err := exec.LookPath(p); err != nil {
			errs = append(errs, fmt.Errorf("%s is not on PATH: %s", p, fix))
		}
	}
	for _, p := range []string{"bridge", "host-local", "loopback", "portmap"} {
		if _, err := os.Stat(filepath.Join(cniBinDir, p)); err != nil {
			errs = append(errs, fmt.Errorf("CNI plugin %s is not in %s: %s", p, cniBinDir, fix))
		}
	}
	if os.Geteuid() != 0 {
		errs = append(errs, errors.New("container nodes need root (containerd, runc, cgroups, network namespaces)"))
	}
	if v1 := cgroupV1Mounts(); len(v1) == 0 {
		if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err != nil {
			errs = append(errs, errors.New("no usable cgroup hierarchy: neither cgroup v1 controllers nor cgroup v2 is mounted under /sys/fs/cgroup"))
		} else {
			// cgroup v2 only: the cgroup root must have its controllers delegated;
			// the container nodes were only tried on cgroup v1 (hybrid) machines.
			errs = append(errs, errors.New("cgroup v2 (unified) hierarchy: container nodes support cgroup v1 only so far; "+
				"boot with systemd.unified_cgroup_hierarchy=0 for a hybrid hierarchy"))
		}
	} else {
		for _, ctl := range missingCgroupControllers(v1) {
			errs = append(errs, fmt.Errorf("cgroup v1 controller %s is not mounted (the kubelet needs %s): "+
				"mkdir -p /sys/fs/cgroup/%[1]s && mount -t cgroup -o %[1]s cgroup /sys/fs/cgroup/%[1]s, "+
				"and if the kernel disabled it, remove cgroup_disable=%[1]s from its command line",
				ctl, strings.Join(kubeletCgroupControllers, ", ")))
		}
	}
	if b, err := os.ReadFile("/proc/filesystems"); err == nil && !strings.Contains(string(b), "overlay") {
		errs = append(errs, errors.New("the kernel has no overlay filesystem (containerd's overlayfs snapshotter): modprobe overlay"))
	}
	if _, err := os.Stat("/proc/sys/net/bridge/bridge-nf-call-iptables"); err != nil {
		errs = append(errs, errors.New("bridged traffic does not pass iptables (no /proc/sys/net/bridge; kube-proxy's Services need it): modprobe br_netfilter"))
	}
	return errs
}

// kubeletCgroupControllers are the cgroup v1 controllers the kubelet
// refuses to start without (its cgroupRoot and QoS cgroups use them).
var kubeletCgroupControllers = []string{"cpu", "cpuacct", "cpuset", "memory", "pids"}

// missingCgroupControllers are the kubeletCgroupControllers that none of the
// cgroup v1 mount points holds (a point is named after its controllers:
// /sys/fs/cgroup/cpu,cpuacct).
func missingCgroupControllers(mountPoints []string) []string {
	have := map[string]bool{}
	for _, m := range mountPoints {
		for _, c := range strings.Split(filepath.Base(m), ",") {
			have[c] = true
		}
	}
	var missing []string
	for _, c := range kubeletCgroupControllers {
		if !have[c] {
			missing = append(missing, c)
		}
	}
	return missing
}

// startContainerNodes starts each node's containerd, imports the pause image,
// then starts its kubelet; Up waits for their Nodes to be Ready.
func (c *Cluster) startContainerNodes(ctx context.Context) error {
	n := c.o.ContainerNodes
	if n == 0 {
		return nil
	}
	ip := c.nodeIP
	pauseBin := filepath.Join(c.o.StateDir, "container-nodes", "pause")
	pauseTar := pauseBin + ".tar"
	if err := BuildStaticBinary(ctx, c.o.RepoDir, "./cmd/pause", pauseBin); err != nil {
		return err
	}
	pause, err := os.ReadFile(pauseBin)
	if err != nil {
		return err
	}
	if err := WriteImageArchive(pauseTar, PauseImage, []string{"/pause"}, ImageFile{Path: "/pause", Data: pause, Mode: 0o755}); err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		node := containerNode{ip: ip, cgroupRoot: containerCgroupRoot(c.o.StateDir, i),
			bridge: containerBridge(c.o.StateDir, i), podCIDR: fmt.Sprintf("10.253.%d.0/24", i)}
		if node.kubeletPort, err = freePort(); err != nil {
			return err
		}
		if node.health, err = freePort(); err != nil {
			return err
		}
		if err := c.writeContainerNodeFiles(i, node); err != nil {
			return fmt.Errorf("container node %d: %w", i, err)
		}
		if err := makeCgroupRoot(node.cgroupRoot); err != nil {
			return fmt.Errorf("container node %d: %w", i, err)
		}
		// SIGTERM, not SIGKILL, when the caller dies: containerd then closes
		// its socket cleanly (the containers outlive it; Down removes them).
		p, err := c.sup.startWith(fmt.Sprintf("%s-%d", Containerd, i),
			[]string{"containerd", "--config", filepath.Join(c.ContainerNodeDir(i), "containerd", "config.toml")}, false, syscall.SIGTERM)
		if err != nil {
			return err
		}
		if err := c.waitContainerd(ctx, p, c.ContainerNodeSocket(i)); err != nil {
			return err
		}
		if err := ImportImage(ctx, c.ContainerNodeSocket(i), pauseTar); err != nil {
			return fmt.Errorf("container node %d: %w", i, err)
		}
		kl, err := c.sup.startWith(fmt.Sprintf("%s-%d", Kubelet, i), c.kubeletArgs(i, node), false, syscall.SIGTERM)
		if err != nil {
			return err
		}
		if err := c.waitHTTP(ctx, kl, fmt.Sprintf("http://127.0.0.1:%d/healthz", node.health), nil); err != nil {
			return err
		}
		c.progress("container node %s: containerd and kubelet up (kubelet API %s:%d)", ContainerNodeName(i), ip, node.kubeletPort)
	}
	if err := c.startClusterNetwork(ctx); err != nil {
		return err
	}
	return c.startStorage(ctx)
}

func (c *Cluster) kubeletArgs(i int, node containerNode) []string {
	dir := c.ContainerNodeDir(i)
	return []string{c.bin(Kubelet),
		"--config=" + filepath.Join(dir, "kubelet.yaml"),
		"--kubeconfig=" + filepath.Join(dir, "kubeconfig"),
		"--root-dir=" + filepath.Join(dir, "kubelet"),
		"--cert-dir=" + filepath.Join(dir, "pki"),
		"--hostname-override=" + ContainerNodeName(i),
		"--node-ip=" + node.ip,
		"--node-labels=" + PoolLabel + "=" + ContainerNodePool,
	}
}

// waitContainerd waits until containerd answers on its socket.
func (c *Cluster) waitContainerd(ctx context.Context, p Process, socket string) error {
	ctx, cancel := context.WithTimeout(ctx, c.o.ReadyTimeout)
	defer cancel()
	for {
		if c.sup.exited(p) {
			return fmt.Errorf("%s exited while starting; end of %s:\n%s", p.Name, p.Log, tail(p.Log, 30))
		}
		vctx, vcancel := context.WithTimeout(ctx, 5*time.Second)
		out, err := exec.CommandContext(vctx, "ctr", "--address", socket, "version").CombinedOutput()
		vcancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not answering on %s after %s (%s); end of %s:\n%s", p.Name, socket, c.o.ReadyTimeout,
				strings.TrimSpace(string(out)), p.Log, tail(p.Log, 30))
		case <-time.After(200 * time.Millisecond):
		}
	}
}
