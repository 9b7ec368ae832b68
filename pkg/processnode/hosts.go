package processnode

import (
	"fmt"
	"net"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/trainyard/trainyard/pkg/runtime"
)

// HostEntry is one pod with an address, as the hosts files list it.
type HostEntry struct {
	UID       string
	Namespace string
	Hostname  string
	Subdomain string
	IP        string
}

// fqdn is <hostname>.<subdomain>.<namespace>.svc.<the default cluster domain>,
// or "" without a subdomain: the hosts files emulate the DNS of a cluster with
// the default domain (runtime.DefaultClusterDomain).
func (e HostEntry) fqdn() string {
	if e.Subdomain == "" {
		return ""
	}
	return fmt.Sprintf("%s.%s.%s.svc.%s", e.Hostname, e.Subdomain, e.Namespace, runtime.DefaultClusterDomain)
}

// ServiceEntry is a headless Service and the addresses cluster DNS answers for
// its name: those of its ready endpoints.
type ServiceEntry struct {
	Namespace string
	Name      string
	IPs       []string // sorted, without duplicates
}

// HeadlessServices are the entries of the headless Services in eps
// (EndpointSlices of any Services; the others are skipped), with the addresses of
// their ready endpoints that keep says to keep (nil keeps all). The EndpointSlice
// controller marks every endpoint of a Service with publishNotReadyAddresses
// ready, so such a Service lists its pods as soon as they have an address, as
// cluster DNS does. Services without such an address are left out.
func HeadlessServices(eps []*discoveryv1.EndpointSlice, keep func(ip string) bool) []ServiceEntry {
	ips := map[[2]string]map[string]bool{}
	for _, s := range eps {
		name := s.Labels[discoveryv1.LabelServiceName]
		if _, headless := s.Labels[corev1.IsHeadlessService]; !headless || name == "" || s.AddressType == discoveryv1.AddressTypeFQDN {
			continue
		}
		key := [2]string{s.Namespace, name}
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			for _, ip := range ep.Addresses {
				if keep != nil && !keep(ip) {
					continue
				}
				if ips[key] == nil {
					ips[key] = map[string]bool{}
				}
				ips[key][ip] = true
			}
		}
	}
	out := make([]ServiceEntry, 0, len(ips))
	for key, set := range ips {
		e := ServiceEntry{Namespace: key[0], Name: key[1]}
		for ip := range set {
			e.IPs = append(e.IPs, ip)
		}
		sort.Strings(e.IPs)
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// RenderHosts is the /etc/hosts of the pod self: the kubelet's header and the pod's
// own names, then every other pod with a subdomain under the names cluster DNS
// would give it: <hostname>.<subdomain>.<ns>.svc.cluster.local everywhere, and
// <hostname>.<subdomain> (what the search path would complete) in its own
// namespace. Pods without a subdomain have no DNS name in a cluster either.
// Then the headless Services: <name>.<ns>.svc.cluster.local and <name>.<ns>
// everywhere, and <name> in the pod's own namespace, once per address (services
// may be nil).
func RenderHosts(self HostEntry, all []HostEntry, services []ServiceEntry) []byte {
	var b strings.Builder
	b.WriteString("# Kubernetes-managed hosts file (trainyard process node).\n")
	b.WriteString("127.0.0.1\tlocalhost\n")
	b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
	b.WriteString("fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n")
	if self.IP != "" {
		names := []string{}
		if f := self.fqdn(); f != "" {
			names = append(names, f, self.Hostname+"."+self.Subdomain)
		}
		names = append(names, self.Hostname)
		fmt.Fprintf(&b, "%s\t%s\n", self.IP, strings.Join(names, " "))
	}
	peers := append([]HostEntry(nil), all...)
	sort.Slice(peers, func(i, j int) bool {
		if peers[i].Namespace != peers[j].Namespace {
			return peers[i].Namespace < peers[j].Namespace
		}
		if peers[i].Subdomain != peers[j].Subdomain {
			return peers[i].Subdomain < peers[j].Subdomain
		}
		return peers[i].Hostname < peers[j].Hostname
	})
	header := false
	for _, p := range peers {
		if p.UID == self.UID || p.IP == "" || p.fqdn() == "" {
			continue
		}
		if !header {
			b.WriteString("# Pods of the process nodes, as cluster DNS names them.\n")
			header = true
		}
		names := []string{p.fqdn()}
		if p.Namespace == self.Namespace {
			names = append(names, p.Hostname+"."+p.Subdomain)
		}
		fmt.Fprintf(&b, "%s\t%s\n", p.IP, strings.Join(names, " "))
	}
	if len(services) > 0 {
		b.WriteString("# Headless Services, as cluster DNS resolves them.\n")
	}
	for _, svc := range services {
		names := []string{fmt.Sprintf("%s.%s.svc.%s", svc.Name, svc.Namespace, runtime.DefaultClusterDomain), svc.Name + "." + svc.Namespace}
		if svc.Namespace == self.Namespace {
			names = append(names, svc.Name)
		}
		for _, ip := range svc.IPs {
			fmt.Fprintf(&b, "%s\t%s\n", ip, strings.Join(names, " "))
		}
	}
	return []byte(b.String())
}

// hostsTable keeps the address of every pod the hosts files list and rewrites the
// hosts file of every local pod, in place, whenever it changes: each file is bind
// mounted on /etc/hosts of its pod, so its inode must stay.
type hostsTable struct {
	mu       sync.Mutex
	local    map[string]HostEntry // uid -> running pod of this node
	remote   map[string]HostEntry // uid -> running pod of another process node
	services []ServiceEntry       // headless Services, sorted
	files    map[string]string    // uid -> hosts file of a local pod
	logf     func(format string, args ...interface{})
}

func newHostsTable(logf func(string, ...interface{})) *hostsTable {
	return &hostsTable{local: map[string]HostEntry{}, remote: map[string]HostEntry{}, files: map[string]string{}, logf: logf}
}

// addLocal registers a local pod and writes its file, then everyone's.
func (t *hostsTable) addLocal(e HostEntry, file string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.local[e.UID] = e
	t.files[e.UID] = file
	return t.rewriteLocked()
}

func (t *hostsTable) removeLocal(uid string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.local[uid]; !ok {
		return
	}
	delete(t.local, uid)
	delete(t.files, uid)
	_ = t.rewriteLocked()
}

// setRemote replaces the pods of the other process nodes.
func (t *hostsTable) setRemote(entries []HostEntry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	next := map[string]HostEntry{}
	for _, e := range entries {
		if _, local := t.local[e.UID]; !local {
			next[e.UID] = e
		}
	}
	if mapsEqual(next, t.remote) {
		return
	}
	t.remote = next
	_ = t.rewriteLocked()
}

// setServices replaces the headless Services (as HeadlessServices returns them).
func (t *hostsTable) setServices(entries []ServiceEntry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if slices.EqualFunc(entries, t.services, func(a, b ServiceEntry) bool {
		return a.Namespace == b.Namespace && a.Name == b.Name && slices.Equal(a.IPs, b.IPs)
	}) {
		return
	}
	t.services = entries
	_ = t.rewriteLocked()
}

func (t *hostsTable) entriesLocked() []HostEntry {
	all := make([]HostEntry, 0, len(t.local)+len(t.remote))
	for _, e := range t.local {
		all = append(all, e)
	}
	for _, e := range t.remote {
		all = append(all, e)
	}
	return all
}

func (t *hostsTable) rewriteLocked() error {
	all := t.entriesLocked()
	var first error
	for uid, file := range t.files {
		if err := writeInPlace(file, RenderHosts(t.local[uid], all, t.services)); err != nil {
			if t.logf != nil {
				t.logf("writing hosts file %s: %v", file, err)
			}
			if first == nil {
				first = err
			}
		}
	}
	return first
}

// writeInPlace replaces the content of path without replacing its inode.
func writeInPlace(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Truncate(int64(len(data))); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func mapsEqual(a, b map[string]HostEntry) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// ipAllocator hands out the addresses of one node's pod range.
type ipAllocator struct {
	mu     sync.Mutex
	subnet *net.IPNet
	used   map[string]bool
	next   int // offset to try first: addresses are handed out round-robin, so a
	// finished pod's address (still in its status) is not reused at once
}

func newIPAllocator(cidr string) (*ipAllocator, error) {
	_, n, err := net.ParseCIDR(cidr)
	if err != nil {
		return nil, err
	}
	if n.IP.To4() == nil {
		return nil, fmt.Errorf("pod range %s: only IPv4 is supported", cidr)
	}
	return &ipAllocator{subnet: n, used: map[string]bool{}}, nil
}

// allocate returns the next free address after the last one handed out, skipping
// the network address, .1 and the broadcast address.
func (a *ipAllocator) allocate() (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ones, bits := a.subnet.Mask.Size()
	size := 1 << (bits - ones)
	base := a.subnet.IP.To4()
	if a.next < 2 || a.next >= size-1 {
		a.next = 2
	}
	for n := 0; n < size-3; n++ {
		i := 2 + (a.next-2+n)%(size-3)
		ip := make(net.IP, 4)
		v := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
		v += uint32(i)
		ip[0], ip[1], ip[2], ip[3] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
		if !a.used[ip.String()] {
			a.used[ip.String()] = true
			a.next = i + 1
			return ip.String(), nil
		}
	}
	return "", fmt.Errorf("no free address in %s", a.subnet)
}

func (a *ipAllocator) release(ip string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.used, ip)
}
