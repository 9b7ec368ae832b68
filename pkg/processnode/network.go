package processnode

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// network wires pods to a Linux bridge with iproute2: each pod gets a veth pair,
// "eth0" inside its network namespace with an address of the node's pod range,
// the other end on the bridge. Without a host address the bridge has none and
// nothing routes to or from it: pods reach each other and nothing else. With one
// (Config.HostAddress) pods also reach the host: at that address and, through
// routes via it, at the host's own other addresses (a local cluster with
// container nodes advertises its manager's status server at the node IP), and
// still nothing beyond the host. The host's network is not changed besides the
// bridge, its address and the veths, which are removed with the pods and on
// stop.
type network struct {
	bridge   string
	hostAddr string // the bridge's address, "" for none
	// hostIPs are the host's other IPv4 addresses, as at start: pods route
	// to each through hostAddr.
	hostIPs   []string
	prefixLen int // of the cluster-wide pod range, the subnet of eth0
	alloc     *ipAllocator
	logf      func(string, ...interface{})
}

func newNetwork(bridge, podCIDR, clusterCIDR string, logf func(string, ...interface{})) (*network, error) {
	if len(bridge) > 15 {
		return nil, fmt.Errorf("bridge name %q is longer than 15 characters", bridge)
	}
	alloc, err := newIPAllocator(podCIDR)
	if err != nil {
		return nil, err
	}
	if clusterCIDR == "" {
		clusterCIDR = podCIDR
	}
	_, cn, err := net.ParseCIDR(clusterCIDR)
	if err != nil {
		return nil, err
	}
	if !cn.Contains(alloc.subnet.IP) {
		return nil, fmt.Errorf("pod range %s is not inside the cluster pod range %s", podCIDR, clusterCIDR)
	}
	ones, _ := cn.Mask.Size()
	return &network{bridge: bridge, prefixLen: ones, alloc: alloc, logf: logf}, nil
}

// setHostAddress checks that addr is in the cluster pod range and outside
// this node's, so no pod gets it.
func (n *network) setHostAddress(addr string) error {
	ip := net.ParseIP(addr)
	if ip == nil || ip.To4() == nil {
		return fmt.Errorf("host address %q is not an IPv4 address", addr)
	}
	if n.alloc.subnet.Contains(ip) {
		return fmt.Errorf("host address %s is inside the node's pod range %s", addr, n.alloc.subnet)
	}
	n.hostAddr = addr
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return fmt.Errorf("listing the host's addresses: %w", err)
	}
	n.hostIPs = hostRoutes(addrs, ip)
	return nil
}

// hostRoutes are the addresses of addrs that pods route to through the host
// address: IPv4, neither loopback nor the host address itself. Routes to
// these only, not a default route: a default route would send what pods
// send beyond the host (a download, the host's resolver) out unmasqueraded
// on a host that forwards, to hang unanswered rather than fail at once.
func hostRoutes(addrs []net.Addr, hostAddr net.IP) []string {
	var ips []string
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok || n.IP.To4() == nil || n.IP.IsLoopback() || n.IP.Equal(hostAddr) {
			continue
		}
		ips = append(ips, n.IP.String())
	}
	return ips
}

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func linkExists(name string) bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", name))
	return err == nil
}

// ensureBridge creates the bridge unless another process node of the cluster did.
func (n *network) ensureBridge() error {
	if !linkExists(n.bridge) {
		if err := ipCmd("link", "add", n.bridge, "type", "bridge"); err != nil && !linkExists(n.bridge) {
			return err
		}
	}
	if n.hostAddr != "" {
		// replace: idempotent, as every process node of the cluster does it.
		if err := ipCmd("addr", "replace", fmt.Sprintf("%s/%d", n.hostAddr, n.prefixLen), "dev", n.bridge); err != nil {
			return err
		}
	}
	return ipCmd("link", "set", n.bridge, "up")
}

// removeBridgeIfUnused deletes the bridge once no veth is attached to it (other
// process nodes of the same cluster may still use it).
func (n *network) removeBridgeIfUnused() {
	if !linkExists(n.bridge) {
		return
	}
	ports, _ := os.ReadDir(filepath.Join("/sys/class/net", n.bridge, "brif"))
	if len(ports) > 0 {
		return
	}
	if err := ipCmd("link", "del", n.bridge); err != nil && n.logf != nil {
		n.logf("removing bridge: %v", err)
	}
}

// VethName is the host end of the veth pair of the pod with this UID: a
// check for what the agent left on the host looks for these names, which
// tell one cluster's pods from another's on the same host (every agent's
// veths start with "tyv").
func VethName(uid string) string {
	h := sha256.Sum256([]byte(uid))
	return "tyv" + hex.EncodeToString(h[:])[:11]
}

// attach gives the network namespace of process pid an eth0 with address ip on the bridge.
func (n *network) attach(pid int, uid, ip string) error {
	host := VethName(uid)
	if linkExists(host) {
		_ = ipCmd("link", "del", host)
	}
	if err := ipCmd("link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", strconv.Itoa(pid)); err != nil {
		return err
	}
	if err := ipCmd("link", "set", host, "master", n.bridge, "up"); err != nil {
		n.detach(uid)
		return err
	}
	cmd := exec.Command("nsenter", "--target", strconv.Itoa(pid), "--net", "--", "ip", "-batch", "-")
	cmd.Stdin = strings.NewReader(n.podScript(ip))
	if out, err := cmd.CombinedOutput(); err != nil {
		n.detach(uid)
		return fmt.Errorf("configuring eth0 of pid %d: %v: %s", pid, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// podScript is the `ip -batch` input that configures a pod's network
// namespace: loopback, eth0 with address ip and, when the bridge has a host
// address, a route through it to each of the host's own addresses.
func (n *network) podScript(ip string) string {
	s := fmt.Sprintf("link set lo up\naddr add %s/%d dev eth0\nlink set eth0 up\n", ip, n.prefixLen)
	if n.hostAddr == "" {
		return s
	}
	for _, h := range n.hostIPs {
		s += fmt.Sprintf("route add %s/32 via %s dev eth0\n", h, n.hostAddr)
	}
	return s
}

// detach removes the host end of a pod's veth pair (the kernel also removes it
// when the pod's network namespace goes).
func (n *network) detach(uid string) {
	host := VethName(uid)
	if linkExists(host) {
		_ = ipCmd("link", "del", host)
	}
}

// DefaultBridge derives a bridge name from a state directory, so that two clusters
// on one machine never share a bridge.
func DefaultBridge(stateDir string) string {
	h := sha256.Sum256([]byte(stateDir))
	return "tyb" + hex.EncodeToString(h[:])[:8]
}
