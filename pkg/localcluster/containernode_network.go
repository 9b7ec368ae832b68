package localcluster

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/trainyard/trainyard/pkg/processnode"
)

// The container nodes' cluster network. Every node's bridge is on this host,
// so the host routes between them (each bridge's /24 is a connected route)
// and the nodes need no overlay. The cluster stays on this host: nothing of
// it answers a neighbour on the LAN, even one that routes the cluster's
// ranges through this host.
//
//   - The node IP is a host-only address, NodeAddress, on an interface of
//     the cluster's own (hostLink, a bridge without ports), not the LAN
//     address: the kubelets'
//     API, the API server (which advertises it for default/kubernetes, so
//     that pods' in-cluster configuration reaches it), CoreDNS, kube-proxy's
//     NodePorts and the manager's status server are bound to it; everything
//     else listens on 127.0.0.1.
//   - One kube-proxy (iptables mode) for the host: all container nodes share
//     the host's network namespace, so one set of KUBE-* chains serves them
//     all, and a kube-proxy per node would rewrite the same chains against
//     each other. It is named after container-node-0 (only for its node
//     address and topology hints; every endpoint is reachable from the host).
//   - Chains of the cluster's own (clusterNetworkRules): in the raw table,
//     packets for the node IP and the cluster's ranges (pods, Services,
//     process-node pods) that arrive on any interface but the loopback and
//     the cluster's bridges are dropped before anything routes or rewrites
//     them; in the filter table, forwarding is accepted between the
//     cluster's bridges (and for their replies) and refused to and from them
//     otherwise, before any rule of the host's. Pods reach each other across
//     bridges and the host's own addresses, and nothing beyond the host: no
//     address of theirs is masqueraded.
//   - CoreDNS on the host behind the kube-dns Service (containernode_dns.go).
//
// Up records what it changed on the host (the kernel's IP forwarding and
// bridged-traffic settings, the node address's interface) in networkRecord, and Down
// puts back what was there before (unless another cluster with container
// nodes still runs). Two clusters with container nodes on one host would
// share the node address, the pod CIDR, the Service CIDR and kube-proxy's
// chains: one waits for the other (containernode_host.go).
const (
	// KubeProxy and CoreDNS are component names: logs/kube-proxy.log, logs/coredns.log.
	KubeProxy = "kube-proxy"
	CoreDNS   = "coredns"
	// NodeAddress is the container nodes' node IP, a host-only address.
	NodeAddress = "10.252.0.1"
	// ServiceCIDR is the cluster's Service range (the API server's
	// --service-cluster-ip-range).
	ServiceCIDR = "10.0.0.0/24"
	// networkRecord names the file that tells Down what to undo.
	networkRecord = "network.json"
)

// kernelSettings are what the pod network needs of the kernel: IP forwarding
// between the bridges, and iptables for bridged traffic (kube-proxy's DNAT of
// a pod's packets to a pod on the same bridge).
var kernelSettings = []string{"/proc/sys/net/ipv4/ip_forward", "/proc/sys/net/bridge/bridge-nf-call-iptables"}

// networkState is what cleanupClusterNetwork needs once the cluster is gone.
type networkState struct {
	KubeProxy string `json:"kubeProxy,omitempty"` // the binary, for kube-proxy --cleanup
	// HostLink is the interface of the node address, when Up made it.
	HostLink string `json:"hostLink,omitempty"`
	// Restore are the kernel settings Up changed, with their values before.
	Restore map[string]string `json:"restore,omitempty"`
}

// hostLink is the interface of a cluster's node address, a bridge without
// ports (at most 15 characters).
func hostLink(stateDir string) string { return "tyh" + stateHash(stateDir) }

// prepareContainerNodes runs before any component starts: it fails at once
// with every missing prerequisite and its fix, waits until no other cluster
// with container nodes runs on this host (claimHost), gives the host the node
// address (on an interface of its own, before anything starts: process nodes
// list the host's addresses when they start, and route their pods to each)
// and adds it to the API server's certificate.
func (c *Cluster) prepareContainerNodes(ctx context.Context) error {
	n := c.o.ContainerNodes
	if n == 0 {
		return nil
	}
	if n > 250 {
		return errors.New("at most 250 container nodes")
	}
	if errs := ContainerNodePrerequisites(); len(errs) > 0 {
		return fmt.Errorf("container nodes: %w", errors.Join(errs...))
	}
	if err := claimHost(ctx, c.o.StateDir, c.progress); err != nil {
		return fmt.Errorf("container nodes: %w", err)
	}
	dir := filepath.Join(c.o.StateDir, "container-nodes")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	link := hostLink(c.o.StateDir)
	if err := writeJSON(filepath.Join(dir, networkRecord), networkState{HostLink: link}); err != nil {
		return err
	}
	if !linkExists(link) {
		// A bridge without ports: a host-only interface (a dummy one would do
		// too, but not every kernel has the dummy module; every one with
		// container nodes has bridges).
		if out, err := exec.Command("ip", "link", "add", link, "type", "bridge").CombinedOutput(); err != nil {
			return fmt.Errorf("container nodes: the node address's interface: %w: %s", err, strings.TrimSpace(string(out)))
		}
	}
	for _, args := range [][]string{{"addr", "replace", NodeAddress + "/32", "dev", link}, {"link", "set", link, "up"}} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("container nodes: ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	c.nodeIP = NodeAddress
	c.pki.hostIPs = []net.IP{net.ParseIP(NodeAddress)}
	return nil
}

// startClusterNetwork sets up forwarding, then starts kube-proxy and the
// cluster DNS; the nodes' kubelets run already.
func (c *Cluster) startClusterNetwork(ctx context.Context) error {
	if c.o.ContainerNodes == 0 {
		return nil
	}
	dir := filepath.Join(c.o.StateDir, "container-nodes")
	record := filepath.Join(dir, networkRecord)
	var st networkState
	if err := readJSON(record, &st); err != nil {
		return err
	}
	st.KubeProxy = c.bin(KubeProxy)
	// Recorded before they change: a failed Up is undone by the Down that follows.
	st.Restore = map[string]string{}
	for _, f := range kernelSettings {
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("container nodes: %w (for bridge-nf-call-iptables: modprobe br_netfilter)", err)
		}
		if v := strings.TrimSpace(string(b)); v != "1" {
			st.Restore[f] = v
		}
	}
	if err := writeJSON(record, st); err != nil {
		return err
	}
	for f := range st.Restore {
		if err := os.WriteFile(f, []byte("1"), 0o644); err != nil {
			return fmt.Errorf("container nodes: setting %s: %w", f, err)
		}
	}
	if err := clusterNetworkRules(c.o.StateDir, c.o.ContainerNodes, true); err != nil {
		return fmt.Errorf("container nodes: %w", err)
	}
	if err := c.startKubeProxy(ctx, filepath.Join(dir, KubeProxy)); err != nil {
		return err
	}
	return c.startClusterDNS(ctx, filepath.Join(dir, CoreDNS))
}

// networkChain is the iptables chain of a cluster's network rules, in the
// raw and the filter table (at most 28 characters).
func networkChain(stateDir string) string { return "TRAINYARD-" + stateHash(stateDir) }

// networkJumps are where networkChain is jumped to from, table by table (nat:
// what clusters from before the host-only node address added, removed too).
var networkJumps = []struct{ table, from string }{{"raw", "PREROUTING"}, {"filter", "FORWARD"}, {"nat", "POSTROUTING"}}

// clusterNetworkRules adds (add) or removes this cluster's rules (see the
// top of this file): in raw PREROUTING, what comes for the cluster from
// anywhere but the loopback and its bridges is dropped; in FORWARD, traffic
// between its bridges, and the replies to it, is accepted, anything else to
// or from them dropped. The CNI bridges do not masquerade (cniConfig), so
// nothing but these chains has to be removed. iptables is run as kube-proxy
// runs it: the rules are few and go-iptables would only wrap the same
// commands.
func clusterNetworkRules(stateDir string, nodes int, add bool) error {
	chain := networkChain(stateDir)
	comment := []string{"-m", "comment", "--comment", "trainyard local cluster " + stateHash(stateDir)}
	var errs []error
	for _, j := range networkJumps {
		jump := append([]string{"-t", j.table, "-D", j.from}, append(comment, "-j", chain)...)
		// Each pass removes one jump; a killed run may have left several.
		for err := iptables(jump...); err == nil; err = iptables(jump...) {
			continue
		}
		if iptables("-t", j.table, "-n", "-L", chain) == nil {
			errs = append(errs, iptables("-t", j.table, "-F", chain), iptables("-t", j.table, "-X", chain))
		}
	}
	if !add || errors.Join(errs...) != nil {
		return errors.Join(errs...)
	}
	// The cluster's bridges: the container nodes' (tyc<hash><i>) and the
	// process nodes' (which routes nothing, but its pods reach the node
	// address through the host).
	var bridges []string
	for i := 0; i < nodes; i++ {
		bridges = append(bridges, containerBridge(stateDir, i))
	}
	bridges = append(bridges, processnode.DefaultBridge(stateDir))
	rules := [][]string{{"-t", "raw", "-N", chain}, {"-t", "raw", "-A", chain, "-i", "lo", "-j", "RETURN"}}
	for _, br := range bridges {
		rules = append(rules, []string{"-t", "raw", "-A", chain, "-i", br, "-j", "RETURN"})
	}
	for _, dst := range []string{NodeAddress + "/32", ContainerPodCIDR, ServiceCIDR, ProcessPodCIDR} {
		rules = append(rules, []string{"-t", "raw", "-A", chain, "-d", dst, "-j", "DROP"})
	}
	rules = append(rules, append(append([]string{"-t", "raw", "-I", "PREROUTING", "1"}, comment...), "-j", chain),
		[]string{"-t", "filter", "-N", chain})
	for _, in := range bridges {
		for _, out := range bridges {
			rules = append(rules, []string{"-t", "filter", "-A", chain, "-i", in, "-o", out, "-j", "ACCEPT"})
		}
	}
	for _, br := range bridges {
		rules = append(rules,
			[]string{"-t", "filter", "-A", chain, "-o", br, "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT"},
			[]string{"-t", "filter", "-A", chain, "-i", br, "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT"})
	}
	for _, br := range bridges {
		rules = append(rules,
			[]string{"-t", "filter", "-A", chain, "-o", br, "-j", "DROP"},
			[]string{"-t", "filter", "-A", chain, "-i", br, "-j", "DROP"})
	}
	rules = append(rules, append(append([]string{"-t", "filter", "-I", "FORWARD", "1"}, comment...), "-j", chain))
	for _, r := range rules {
		if err := iptables(r...); err != nil {
			return err
		}
	}
	return nil
}

func iptables(args ...string) error {
	out, err := exec.Command("iptables", append([]string{"-w"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// startKubeProxy starts the host's kube-proxy with a client certificate of
// user system:kube-proxy (bound to the system:node-proxier role by the API
// server's default policy). It leaves the host's conntrack limits and
// route_localnet alone, and serves NodePorts on the node IP only.
func (c *Cluster) startKubeProxy(ctx context.Context, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	crt, key := filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")
	if err := c.pki.issue(crt, key, pkix.Name{CommonName: "system:kube-proxy"}, x509.ExtKeyUsageClientAuth, nil, nil); err != nil {
		return fmt.Errorf("kube-proxy client certificate: %w", err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := c.writeNodeKubeconfig(kubeconfig, crt, key); err != nil {
		return err
	}
	health, err := freePort()
	if err != nil {
		return err
	}
	metrics, err := freePort()
	if err != nil {
		return err
	}
	p, err := c.sup.start(KubeProxy, []string{c.bin(KubeProxy),
		"--kubeconfig=" + kubeconfig,
		"--proxy-mode=iptables",
		"--cluster-cidr=" + ContainerPodCIDR,
		"--hostname-override=" + ContainerNodeName(0),
		"--bind-address=" + c.nodeIP,
		"--nodeport-addresses=" + c.nodeIP + "/32",
		"--iptables-localhost-nodeports=false",
		"--conntrack-max-per-core=0",
		"--conntrack-tcp-timeout-established=0",
		"--conntrack-tcp-timeout-close-wait=0",
		"--healthz-bind-address=" + loopback(health),
		"--metrics-bind-address=" + loopback(metrics),
	}, false)
	if err != nil {
		return err
	}
	if err := c.waitHTTP(ctx, p, fmt.Sprintf("http://%s/healthz", loopback(health)), nil); err != nil {
		return err
	}
	c.progress("kube-proxy ready (iptables mode, one for the host)")
	return nil
}

// cleanupClusterNetwork removes what the cluster network added to the host:
// kube-proxy's chains (kube-proxy --cleanup), this cluster's rules and node
// address, and puts back the kernel settings Up changed, unless another
// cluster with container nodes runs now (it needs them).
func cleanupClusterNetwork(stateDir string) error {
	var st networkState
	if err := readJSON(filepath.Join(stateDir, "container-nodes", networkRecord), &st); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil // no cluster network was set up
		}
		return fmt.Errorf("%s: %w", networkRecord, err)
	}
	var errs []error
	// Another cluster's kube-proxy owns the KUBE-* chains now (this one's
	// Up, cleaning up its predecessor, waits for that cluster only later).
	other := otherClusterOnHost(stateDir) != ""
	if !other && st.KubeProxy != "" {
		if out, err := exec.Command(st.KubeProxy, "--cleanup").CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("kube-proxy --cleanup: %w: %s", err, tail1(string(out))))
		}
	}
	errs = append(errs, clusterNetworkRules(stateDir, 0, false))
	if st.HostLink != "" && linkExists(st.HostLink) {
		if out, err := exec.Command("ip", "link", "delete", st.HostLink).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("ip link delete %s: %w: %s", st.HostLink, err, strings.TrimSpace(string(out))))
		}
	}
	if !other {
		for f, v := range st.Restore {
			if err := os.WriteFile(f, []byte(v), 0o644); err != nil {
				errs = append(errs, fmt.Errorf("restoring %s to %s: %w", f, v, err))
			}
		}
	}
	return errors.Join(errs...)
}

// tail1 is the last line of a command's output.
func tail1(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
