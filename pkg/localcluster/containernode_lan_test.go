package localcluster

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The local cluster with container nodes stays on its host (issue #40): a
// neighbour on the LAN, even one that routes the cluster's ranges through
// this host, reaches nothing of it. lanNeighbour stands in for one: a
// network namespace on a veth pair whose host end has lanHostAddress (as
// the host's LAN address) and which routes everything through it.
const (
	lanHostAddress     = "198.51.100.1"
	lanNeighborAddress = "198.51.100.2"
)

type lanNeighbour struct {
	name, hostEnd string
	ns            *os.File
}

func newLANNeighbour(t *testing.T, stateDir string) *lanNeighbour {
	t.Helper()
	n := &lanNeighbour{name: "tyl" + stateHash(stateDir), hostEnd: "tyl" + stateHash(stateDir) + "h"}
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	run("netns", "add", n.name)
	t.Cleanup(func() {
		if n.ns != nil {
			_ = n.ns.Close()
		}
		_ = exec.Command("ip", "link", "delete", n.hostEnd).Run()
		_ = exec.Command("ip", "netns", "delete", n.name).Run()
	})
	run("link", "add", n.hostEnd, "type", "veth", "peer", "name", "lan0", "netns", n.name)
	run("addr", "add", lanHostAddress+"/30", "dev", n.hostEnd)
	run("link", "set", n.hostEnd, "up")
	run("-n", n.name, "addr", "add", lanNeighborAddress+"/30", "dev", "lan0")
	run("-n", n.name, "link", "set", "lan0", "up")
	run("-n", n.name, "link", "set", "lo", "up")
	// Everything, the cluster's ranges included, through this host.
	run("-n", n.name, "route", "add", "default", "via", lanHostAddress)
	var err error
	if n.ns, err = os.Open(filepath.Join("/run/netns", n.name)); err != nil {
		t.Fatal(err)
	}
	return n
}

// do runs f with its sockets in the neighbour's network namespace.
func (n *lanNeighbour) do(f func()) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	self, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	if err != nil {
		return err
	}
	defer func() { _ = self.Close() }()
	if err := unix.Setns(int(n.ns.Fd()), unix.CLONE_NEWNET); err != nil {
		return err
	}
	f()
	// Back, or the thread must not run anything else: it stays locked.
	if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
		panic(err)
	}
	return nil
}

// dialTCP tells whether addr accepts a TCP connection within a second.
func dialTCP(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		_ = c.Close()
	}
	return err == nil
}

// dnsAnswers tells whether a DNS server at addr answers a query for
// kubernetes.default.svc.cluster.local within a second.
func dnsAnswers(addr string) bool {
	c, err := net.DialTimeout("udp", addr, time.Second)
	if err != nil {
		return false
	}
	defer func() { _ = c.Close() }()
	q := []byte{0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0} // id, RD, one question
	for _, l := range strings.Split("kubernetes.default.svc.cluster.local", ".") {
		q = append(append(q, byte(len(l))), l...)
	}
	q = append(q, 0, 0, 1, 0, 1) // A, IN
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write(q); err != nil {
		return false
	}
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	return err == nil && n >= 12 && buf[0] == 0x12 && buf[1] == 0x34
}

// listening is a TCP or UDP socket a process of the cluster listens on.
type listening struct {
	proto, addr string
	port        int
	process     string
}

// clusterSockets lists the sockets the cluster's processes listen on (TCP)
// or are bound to (UDP), but loopback ones.
func clusterSockets(t *testing.T, c *Cluster) []listening {
	t.Helper()
	inodes := map[string]string{} // socket inode -> process name
	for _, p := range c.Processes() {
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.PID))
		for _, fd := range fds {
			l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", p.PID, fd.Name()))
			if ino, ok := strings.CutPrefix(l, "socket:["); err == nil && ok {
				inodes[strings.TrimSuffix(ino, "]")] = p.Name
			}
		}
	}
	var out []listening
	for _, f := range []string{"tcp", "tcp6", "udp", "udp6"} {
		file, err := os.Open("/proc/net/" + f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(file)
		sc.Scan() // header
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) < 10 {
				continue
			}
			proc, ours := inodes[fs[9]]
			listen := fs[3] == "0A" || strings.HasPrefix(f, "udp") && fs[3] == "07"
			if !ours || !listen {
				continue
			}
			host, port, _ := strings.Cut(fs[1], ":")
			ip := procNetIP(host)
			if ip.IsLoopback() {
				continue
			}
			p, _ := strconv.ParseUint(port, 16, 16)
			out = append(out, listening{proto: strings.TrimSuffix(f, "6"), addr: ip.String(), port: int(p), process: proc})
		}
		_ = file.Close()
	}
	return out
}

// procNetIP decodes an address of /proc/net/{tcp,udp}[6]: 32-bit words in
// host (little-endian) order.
func procNetIP(s string) net.IP {
	b, _ := hex.DecodeString(s)
	ip := make(net.IP, len(b))
	for i := 0; i+4 <= len(b); i += 4 {
		binary.BigEndian.PutUint32(ip[i:], binary.LittleEndian.Uint32(b[i:]))
	}
	return ip
}

// checkLANNeighbour: from a LAN neighbour that routes everything through
// this host, no socket of the cluster's processes answers, at the host's
// (LAN) address nor at the node address, and neither do a pod, a ClusterIP,
// a NodePort or the cluster DNS; from the host, the node address, the pod,
// the ClusterIP, the NodePort and the DNS answer. A server of the test's on
// the host's LAN address answers the neighbour, so the namespace does reach
// the host. Before issue #40 the API server listened on every address, CoreDNS
// answered (and forwarded) for anyone, and FORWARD accepted anything to the
// pod range.
func checkLANNeighbour(ctx context.Context, t *testing.T, c *Cluster, podIP, clusterIP string) {
	t.Helper()
	n := newLANNeighbour(t, c.o.StateDir)
	control, err := net.Listen("tcp", net.JoinHostPort(lanHostAddress, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = control.Close() }()
	go func() {
		for {
			conn, err := control.Accept()
			if err != nil {
				return
			}
			_ = conn.Close()
		}
	}()

	// web as a NodePort too, which kube-proxy serves on the node address.
	web := &corev1.Service{}
	if err := c.client.Get(ctx, types.NamespacedName{Namespace: "default", Name: "web"}, web); err != nil {
		t.Fatal(err)
	}
	web.Spec.Type = corev1.ServiceTypeNodePort
	web.Spec.Ports[0].TargetPort = intstr.FromInt32(8080)
	if err := c.client.Update(ctx, web); err != nil {
		t.Fatal(err)
	}
	nodePort := net.JoinHostPort(NodeAddress, strconv.Itoa(int(web.Spec.Ports[0].NodePort)))
	if err := c.poll(ctx, "web's NodePort from the host", func() (bool, string, error) {
		return dialTCP(nodePort), "no answer", nil
	}); err != nil {
		t.Fatal(err)
	}

	sockets := clusterSockets(t, c)
	var dns string
	type target struct{ what, proto, addr string }
	var targets []target
	for _, s := range sockets {
		addrs := []string{s.addr}
		if net.ParseIP(s.addr).IsUnspecified() {
			addrs = []string{lanHostAddress, NodeAddress}
		}
		for _, a := range addrs {
			targets = append(targets, target{fmt.Sprintf("%s's %s socket on %s:%d", s.process, s.proto, s.addr, s.port), s.proto, net.JoinHostPort(a, strconv.Itoa(s.port))})
		}
		if s.process == CoreDNS && s.proto == "udp" {
			dns = net.JoinHostPort(NodeAddress, strconv.Itoa(s.port))
		}
	}
	t.Logf("the cluster's sockets but loopback ones: %v", sockets)
	if dns == "" {
		t.Fatalf("CoreDNS has no UDP socket but loopback ones: %v", sockets)
	}
	targets = append(targets,
		target{"the server pod", "tcp", net.JoinHostPort(podIP, "8080")},
		target{"web's ClusterIP", "tcp", net.JoinHostPort(clusterIP, "80")},
		target{"web's NodePort", "tcp", nodePort},
		target{"the cluster DNS Service", "udp", net.JoinHostPort(ClusterDNS, "53")})

	// From the host: what pods and the host use answers.
	for _, tg := range []target{{"the server pod", "tcp", net.JoinHostPort(podIP, "8080")}, {"web's NodePort", "tcp", nodePort},
		{"CoreDNS", "udp", dns}, {"the API server", "tcp", c.apiserverAddr()}} {
		ok := dialTCP(tg.addr)
		if tg.proto == "udp" {
			ok = dnsAnswers(tg.addr)
		}
		if !ok {
			t.Errorf("from the host, %s (%s) does not answer", tg.what, tg.addr)
		}
	}

	var answered []string
	controlOK := false
	err = n.do(func() {
		controlOK = dialTCP(control.Addr().String())
		for _, tg := range targets {
			ok := false
			if tg.proto == "udp" {
				ok = dnsAnswers(tg.addr)
			} else {
				ok = dialTCP(tg.addr)
			}
			if ok {
				answered = append(answered, fmt.Sprintf("%s at %s", tg.what, tg.addr))
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if !controlOK {
		t.Fatalf("the LAN neighbour does not reach a server on the host's LAN address %s: the test's network is broken", control.Addr())
	}
	t.Logf("from the LAN neighbour, %d targets tried", len(targets))
	for _, a := range answered {
		t.Errorf("a LAN neighbour reaches %s", a)
	}
}
