package localcluster

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The container nodes' cluster network. Every node's bridge is on this host,
// so the host routes between them (each bridge's /24 is a connected route)
// and the nodes need no overlay. What the network adds to the nodes:
//
//   - the API server listens on every address and advertises the node IP, so
//     that the default/kubernetes Service has endpoints and pods' in-cluster
//     configuration reaches it (apiserverArgs);
//   - one kube-proxy (iptables mode) for the host: all container nodes share
//     the host's network namespace, so one set of KUBE-* chains serves them
//     all, and a kube-proxy per node would rewrite the same chains against
//     each other. It is named after container-node-0 (only for its node
//     address and topology hints; every endpoint is reachable from the host);
//   - forwarding and masquerading for the pod CIDR in chains of this
//     cluster's own (podNetworkRules): pods reach each other across bridges,
//     the host and, masqueraded, what the host reaches;
//   - CoreDNS on the host behind the kube-dns Service (containernode_dns.go).
//
// The kernel settings it needs (IP forwarding, bridged traffic through
// iptables) are host-wide and stay set after Down. Two clusters with
// container nodes on one host would share the pod CIDR, the Service CIDR
// and kube-proxy's chains: one waits for the other (containernode_host.go).
const (
	// KubeProxy and CoreDNS are component names: logs/kube-proxy.log, logs/coredns.log.
	KubeProxy = "kube-proxy"
	CoreDNS   = "coredns"
	// networkRecord names the file that tells Down what to undo.
	networkRecord = "network.json"
)

// networkState is what cleanupClusterNetwork needs once the cluster is gone.
type networkState struct {
	KubeProxy string `json:"kubeProxy"` // the binary, for kube-proxy --cleanup
}

// prepareContainerNodes runs before any component starts: it fails at once
// with every missing prerequisite and its fix, waits until no other cluster
// with container nodes runs on this host (claimHost), chooses the node IP
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
	ip, err := hostIP()
	if err != nil {
		return fmt.Errorf("container nodes: %w", err)
	}
	c.nodeIP = ip
	c.pki.hostIPs = []net.IP{net.ParseIP(ip)}
	return nil
}

// startClusterNetwork sets up forwarding, then starts kube-proxy and the
// cluster DNS; the nodes' kubelets run already.
func (c *Cluster) startClusterNetwork(ctx context.Context) error {
	if c.o.ContainerNodes == 0 {
		return nil
	}
	dir := filepath.Join(c.o.StateDir, "container-nodes")
	if err := writeJSON(filepath.Join(dir, networkRecord), networkState{KubeProxy: c.bin(KubeProxy)}); err != nil {
		return err
	}
	if err := enableForwarding(); err != nil {
		return fmt.Errorf("container nodes: %w", err)
	}
	if err := podNetworkRules(c.o.StateDir, true); err != nil {
		return fmt.Errorf("container nodes: %w", err)
	}
	if err := c.startKubeProxy(ctx, filepath.Join(dir, KubeProxy)); err != nil {
		return err
	}
	return c.startClusterDNS(ctx, filepath.Join(dir, CoreDNS))
}

// enableForwarding turns on what the pod network needs of the kernel: IP
// forwarding between the bridges and eth0, and iptables for bridged traffic
// (kube-proxy's DNAT of a pod's packets to a pod on the same bridge).
func enableForwarding() error {
	for _, f := range []string{"/proc/sys/net/ipv4/ip_forward", "/proc/sys/net/bridge/bridge-nf-call-iptables"} {
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("%w (for bridge-nf-call-iptables: modprobe br_netfilter)", err)
		}
		if strings.TrimSpace(string(b)) == "1" {
			continue
		}
		if err := os.WriteFile(f, []byte("1"), 0o644); err != nil {
			return fmt.Errorf("setting %s: %w", f, err)
		}
	}
	return nil
}

// networkChain is the iptables chain of a cluster's pod network rules, in
// the filter and the nat table (at most 28 characters).
func networkChain(stateDir string) string { return "TRAINYARD-" + stateHash(stateDir) }

// podNetworkRules adds (add) or removes this cluster's forwarding and
// masquerading rules: pod traffic is accepted in FORWARD (before any DROP of
// the host's), and pods' packets to anything but a pod leave with the host's
// address. The CNI bridges do not masquerade (cniConfig), so nothing but
// these chains has to be removed. iptables is run as kube-proxy runs it: the
// rules are few and go-iptables would only wrap the same commands.
func podNetworkRules(stateDir string, add bool) error {
	chain := networkChain(stateDir)
	comment := []string{"-m", "comment", "--comment", "trainyard local cluster " + stateHash(stateDir)}
	jumps := []struct{ table, from string }{{"filter", "FORWARD"}, {"nat", "POSTROUTING"}}
	var errs []error
	for _, j := range jumps {
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
	rules := [][]string{
		{"-t", "filter", "-N", chain},
		{"-t", "filter", "-A", chain, "-s", ContainerPodCIDR, "-j", "ACCEPT"},
		{"-t", "filter", "-A", chain, "-d", ContainerPodCIDR, "-j", "ACCEPT"},
		append(append([]string{"-t", "filter", "-I", "FORWARD", "1"}, comment...), "-j", chain),
		{"-t", "nat", "-N", chain},
		{"-t", "nat", "-A", chain, "-d", ContainerPodCIDR, "-j", "RETURN"},
		{"-t", "nat", "-A", chain, "-s", ContainerPodCIDR, "-j", "MASQUERADE"},
		append(append([]string{"-t", "nat", "-A", "POSTROUTING"}, comment...), "-j", chain),
	}
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
// kube-proxy's chains (kube-proxy --cleanup) and this cluster's rules.
func cleanupClusterNetwork(stateDir string) error {
	b, err := os.ReadFile(filepath.Join(stateDir, "container-nodes", networkRecord))
	if err != nil {
		return nil // no cluster network was set up
	}
	var st networkState
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("%s: %w", networkRecord, err)
	}
	var errs []error
	// Another cluster's kube-proxy owns the KUBE-* chains now (this one's
	// Up, cleaning up its predecessor, waits for that cluster only later).
	if otherClusterOnHost(stateDir) == "" {
		if out, err := exec.Command(st.KubeProxy, "--cleanup").CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("kube-proxy --cleanup: %w: %s", err, tail1(string(out))))
		}
	}
	errs = append(errs, podNetworkRules(stateDir, false))
	return errors.Join(errs...)
}

// tail1 is the last line of a command's output.
func tail1(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
