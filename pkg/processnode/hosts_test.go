package processnode

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
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
	got := string(RenderHosts(self, all))
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
	bare := string(RenderHosts(HostEntry{UID: "x", Namespace: "n", Hostname: "plain", IP: "10.254.0.9"}, nil))
	if !strings.Contains(bare, "10.254.0.9\tplain\n") {
		t.Errorf("pod without subdomain:\n%s", bare)
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
