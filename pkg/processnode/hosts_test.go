package processnode

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestRenderHosts(t *testing.T) {
	self := HostEntry{UID: "a", Namespace: "team", Hostname: "job-node-0-1", Subdomain: "job", IP: "10.254.0.3"}
	all := []HostEntry{
		self,
		{UID: "b", Namespace: "team", Hostname: "job-node-0-0", Subdomain: "job", IP: "10.254.0.2"},
		{UID: "c", Namespace: "other", Hostname: "job-node-0-0", Subdomain: "job", IP: "10.254.0.4"},
		{UID: "d", Namespace: "team", Hostname: "lonely", IP: "10.254.0.5"},  // no subdomain: no DNS name
		{UID: "e", Namespace: "team", Hostname: "pending", Subdomain: "job"}, // no address yet
	}
	got := string(RenderHosts(self, all, nil))
	want := `# Kubernetes-managed hosts file (trainyard process node).
127.0.0.1	localhost
::1	localhost ip6-localhost ip6-loopback
fe00::0	ip6-localnet
fe00::0	ip6-mcastprefix
fe00::1	ip6-allnodes
fe00::2	ip6-allrouters
10.254.0.3	job-node-0-1.job.team.svc.cluster.local job-node-0-1.job job-node-0-1
# Pods of the process nodes, as cluster DNS names them.
10.254.0.4	job-node-0-0.job.other.svc.cluster.local
10.254.0.2	job-node-0-0.job.team.svc.cluster.local job-node-0-0.job
`
	if got != want {
		t.Errorf("hosts file:\n%s\nwant:\n%s", got, want)
	}
	bare := string(RenderHosts(HostEntry{UID: "x", Namespace: "n", Hostname: "plain", IP: "10.254.0.9"}, nil, nil))
	if !strings.Contains(bare, "10.254.0.9\tplain\n") {
		t.Errorf("pod without subdomain:\n%s", bare)
	}
}

// Headless Services resolve as cluster DNS resolves them: the full name and
// <name>.<ns> everywhere, the bare name in the pod's own namespace, once per
// ready address. A PyTorchJob's MASTER_ADDR is such a bare name.
func TestRenderHostsServices(t *testing.T) {
	self := HostEntry{UID: "a", Namespace: "team", Hostname: "pj-worker-0", IP: "10.254.0.3"}
	services := []ServiceEntry{
		{Namespace: "other", Name: "pj-master-0", IPs: []string{"10.254.0.7"}},
		{Namespace: "team", Name: "pj-master-0", IPs: []string{"10.254.0.2"}},
		{Namespace: "team", Name: "pair", IPs: []string{"10.254.0.4", "10.254.0.5"}},
	}
	got := string(RenderHosts(self, []HostEntry{self}, services))
	want := `10.254.0.3	pj-worker-0
# Headless Services, as cluster DNS resolves them.
10.254.0.7	pj-master-0.other.svc.cluster.local pj-master-0.other
10.254.0.2	pj-master-0.team.svc.cluster.local pj-master-0.team pj-master-0
10.254.0.4	pair.team.svc.cluster.local pair.team pair
10.254.0.5	pair.team.svc.cluster.local pair.team pair
`
	if !strings.HasSuffix(got, want) {
		t.Errorf("hosts file:\n%s\nwant it to end with:\n%s", got, want)
	}
}

func slice(ns, svc, name string, headless bool, endpoints ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	l := map[string]string{discoveryv1.LabelServiceName: svc}
	if headless {
		l[corev1.IsHeadlessService] = ""
	}
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: l},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   endpoints,
	}
}

func endpoint(ready *bool, ips ...string) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: ips, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
}

// The Services come from EndpointSlices: headless ones only, ready endpoints
// only (unset counts as ready), the slices of one Service merged, addresses
// outside what keep accepts dropped, and Services left without an address
// omitted.
func TestHeadlessServices(t *testing.T) {
	in := []*discoveryv1.EndpointSlice{
		slice("team", "pj-master-0", "pj-master-0-abc", true, endpoint(ptr.To(true), "10.254.0.2")),
		slice("team", "web", "web-abc", false, endpoint(ptr.To(true), "10.254.0.9")), // has a cluster IP
		slice("team", "pair", "pair-1", true, endpoint(nil, "10.254.0.5"), endpoint(ptr.To(false), "10.254.0.6")),
		slice("team", "pair", "pair-2", true, endpoint(ptr.To(true), "10.254.0.4", "10.254.0.5")),
		slice("team", "kwok", "kwok-1", true, endpoint(ptr.To(true), "10.244.0.8")),
		slice("other", "pj-master-0", "pj-master-0-def", true, endpoint(ptr.To(true), "10.254.1.2")),
		slice("team", "empty", "empty-1", true),
		{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "fqdn", Labels: map[string]string{discoveryv1.LabelServiceName: "ext", corev1.IsHeadlessService: ""}},
			AddressType: discoveryv1.AddressTypeFQDN, Endpoints: []discoveryv1.Endpoint{endpoint(nil, "example.com")}},
	}
	got := HeadlessServices(in, func(ip string) bool { return strings.HasPrefix(ip, "10.254.") })
	want := []ServiceEntry{
		{Namespace: "other", Name: "pj-master-0", IPs: []string{"10.254.1.2"}},
		{Namespace: "team", Name: "pair", IPs: []string{"10.254.0.4", "10.254.0.5"}},
		{Namespace: "team", Name: "pj-master-0", IPs: []string{"10.254.0.2"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("services (-want +got):\n%s", diff)
	}
}

func TestHostsTableRewritesInPlace(t *testing.T) {
	dir := t.TempDir()
	fa, fb := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	tbl := newHostsTable(t.Logf)
	if err := tbl.addLocal(HostEntry{UID: "a", Namespace: "ns", Hostname: "j-0", Subdomain: "j", IP: "10.254.0.2"}, fa); err != nil {
		t.Fatal(err)
	}
	inode := func(p string) uint64 {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return st.Sys().(*syscall.Stat_t).Ino
	}
	ino := inode(fa)
	if err := tbl.addLocal(HostEntry{UID: "b", Namespace: "ns", Hostname: "j-1", Subdomain: "j", IP: "10.254.0.3"}, fb); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(fa)
	if !strings.Contains(string(a), "10.254.0.3\tj-1.j.ns.svc.cluster.local j-1.j\n") {
		t.Errorf("a does not list b:\n%s", a)
	}
	tbl.setRemote([]HostEntry{{UID: "r", Namespace: "ns", Hostname: "j-2", Subdomain: "j", IP: "10.254.1.2"}})
	a, _ = os.ReadFile(fa)
	if !strings.Contains(string(a), "10.254.1.2\tj-2.j.ns.svc.cluster.local j-2.j\n") {
		t.Errorf("a does not list the remote pod:\n%s", a)
	}
	tbl.setServices([]ServiceEntry{{Namespace: "ns", Name: "j-master-0", IPs: []string{"10.254.0.3"}}})
	a, _ = os.ReadFile(fa)
	if !strings.Contains(string(a), "10.254.0.3\tj-master-0.ns.svc.cluster.local j-master-0.ns j-master-0\n") {
		t.Errorf("a does not list the Service:\n%s", a)
	}
	tbl.setServices(nil)
	a, _ = os.ReadFile(fa)
	if strings.Contains(string(a), "j-master-0") {
		t.Errorf("a still lists the Service after it lost its endpoints:\n%s", a)
	}
	tbl.removeLocal("b")
	a, _ = os.ReadFile(fa)
	if strings.Contains(string(a), "10.254.0.3") {
		t.Errorf("a still lists b after it went:\n%s", a)
	}
	if inode(fa) != ino {
		t.Error("the hosts file was replaced, not rewritten in place: a bind mount would keep the old one")
	}
}

func TestIPAllocator(t *testing.T) {
	a, err := newIPAllocator("10.254.3.0/29")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i := 0; i < 5; i++ {
		ip, err := a.allocate()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ip)
	}
	if strings.Join(got, ",") != "10.254.3.2,10.254.3.3,10.254.3.4,10.254.3.5,10.254.3.6" {
		t.Errorf("allocated %v", got)
	}
	if _, err := a.allocate(); err == nil {
		t.Error("a full range must say so")
	}
	a.release("10.254.3.3")
	if ip, _ := a.allocate(); ip != "10.254.3.3" {
		t.Errorf("after release got %s", ip)
	}
	// Round-robin: a released address is not the first one handed out again.
	a.release("10.254.3.2")
	a.release("10.254.3.5")
	if ip, _ := a.allocate(); ip != "10.254.3.5" {
		t.Errorf("round-robin: got %s, want 10.254.3.5", ip)
	}
	if _, err := newIPAllocator("fd00::/64"); err == nil {
		t.Error("IPv6 ranges are not supported")
	}
}

func TestSetHostAddress(t *testing.T) {
	for _, tc := range []struct {
		addr    string
		wantErr bool
	}{
		{addr: "10.254.255.254"},
		{addr: "10.254.0.7", wantErr: true}, // a pod's address of this node
		{addr: "fd00::1", wantErr: true},
		{addr: "bridge", wantErr: true},
	} {
		n, err := newNetwork("tybtest", "10.254.0.0/24", "10.254.0.0/16", nil)
		if err != nil {
			t.Fatal(err)
		}
		err = n.setHostAddress(tc.addr)
		if (err != nil) != tc.wantErr {
			t.Errorf("setHostAddress(%q) = %v, want error %v", tc.addr, err, tc.wantErr)
		}
		if err == nil && n.hostAddr != tc.addr {
			t.Errorf("setHostAddress(%q): hostAddr %q", tc.addr, n.hostAddr)
		}
	}
}

// TestPodScript: with a host address on the bridge, a pod's namespace gets a
// route through it to each of the host's own addresses, and no default
// route; without one, pods reach only each other.
func TestPodScript(t *testing.T) {
	const base = "link set lo up\naddr add 10.254.0.7/16 dev eth0\nlink set eth0 up\n"
	host := []net.Addr{
		&net.IPNet{IP: net.IPv4(127, 0, 0, 1), Mask: net.CIDRMask(8, 32)},
		&net.IPNet{IP: net.ParseIP("192.0.2.2"), Mask: net.CIDRMask(24, 32)},
		&net.IPNet{IP: net.ParseIP("10.254.255.254"), Mask: net.CIDRMask(16, 32)},
		&net.IPNet{IP: net.ParseIP("10.253.0.1"), Mask: net.CIDRMask(24, 32)},
		&net.IPNet{IP: net.ParseIP("fd00::2"), Mask: net.CIDRMask(64, 128)},
	}
	for _, tc := range []struct {
		hostAddr, want string
	}{
		{"", base},
		{"10.254.255.254", base + "route add 192.0.2.2/32 via 10.254.255.254 dev eth0\n" +
			"route add 10.253.0.1/32 via 10.254.255.254 dev eth0\n"},
	} {
		n, err := newNetwork("tybtest", "10.254.0.0/24", "10.254.0.0/16", nil)
		if err != nil {
			t.Fatal(err)
		}
		if tc.hostAddr != "" {
			n.hostAddr = tc.hostAddr
			n.hostIPs = hostRoutes(host, net.ParseIP(tc.hostAddr))
		}
		if diff := cmp.Diff(tc.want, n.podScript("10.254.0.7")); diff != "" {
			t.Errorf("host address %q: script (-want +got):\n%s", tc.hostAddr, diff)
		}
	}
}
