package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	trruntime "github.com/trainyard/trainyard/pkg/runtime"
)

// The container nodes' cluster DNS: CoreDNS (test/tools/coredns, only the
// plugins it needs) runs on the host as the other controllers do, on a free
// port of the node address only (its bind plugin: a resolver that forwards
// must not answer the LAN), and the kube-dns Service in kube-system with
// ClusterIP ClusterDNS, which the kubelets write into pods' resolv.conf,
// leads there: the Service has no selector and one EndpointSlice of this
// cluster's own, the node IP and CoreDNS's port, and kube-proxy forwards
// port 53 to it. CoreDNS answers for the default cluster domain from the API server
// (Services, headless Services' pods by host name and subdomain, as JobSet
// names its pods) and forwards the rest to the host's resolvers.
const (
	// DNSService is the cluster DNS Service (namespace kube-system), named as
	// kubeadm names it.
	DNSService = "kube-dns"
	// dnsSlice is the EndpointSlice that leads the Service to CoreDNS.
	dnsSlice = "kube-dns-host"
)

// corefile is CoreDNS's configuration: on address only, the cluster domain
// from the API server (with the admin kubeconfig, as the other host
// controllers; pods records "insecure" as kube-dns answered them), reverse
// lookups of cluster IPs, everything else to the host's resolvers; health
// and readiness on loopback ports.
func corefile(address string, port, health, ready int, kubeconfig string) string {
	return fmt.Sprintf(`.:%d {
    bind %s
    errors
    health %s
    ready %s
    kubernetes %s in-addr.arpa ip6.arpa {
        kubeconfig %s trainyard-local
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }
    forward . /etc/resolv.conf
    cache 5
}
`, port, address, loopback(health), loopback(ready), trruntime.DefaultClusterDomain, kubeconfig)
}

// startClusterDNS starts CoreDNS and leads the kube-dns Service to it; it
// returns once CoreDNS has synced with the API server (its ready plugin).
func (c *Cluster) startClusterDNS(ctx context.Context, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	var ports [3]int
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return err
		}
		ports[i] = p
	}
	dns, health, ready := ports[0], ports[1], ports[2]
	conf := filepath.Join(dir, "Corefile")
	if err := os.WriteFile(conf, []byte(corefile(c.nodeIP, dns, health, ready, c.Kubeconfig())), 0o644); err != nil {
		return err
	}
	p, err := c.sup.start(CoreDNS, []string{c.bin(CoreDNS), "-conf", conf}, false)
	if err != nil {
		return err
	}
	if err := c.waitHTTP(ctx, p, fmt.Sprintf("http://%s/ready", loopback(ready)), nil); err != nil {
		return err
	}
	if err := c.createDNSService(ctx, dns); err != nil {
		return fmt.Errorf("cluster DNS Service: %w", err)
	}
	c.progress("CoreDNS ready on %s:%d, Service %s/%s at %s", c.nodeIP, dns, "kube-system", DNSService, ClusterDNS)
	return nil
}

// createDNSService creates the kube-dns Service (TCP and UDP 53) and its
// EndpointSlice: the node IP and port.
func (c *Cluster) createDNSService(ctx context.Context, port int) error {
	svc := &corev1.Service{}
	svc.Name, svc.Namespace = DNSService, "kube-system"
	svc.Labels = map[string]string{"k8s-app": DNSService}
	svc.Spec = corev1.ServiceSpec{
		ClusterIP: ClusterDNS,
		Ports: []corev1.ServicePort{
			{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(int32(port))},
			{Name: "dns-tcp", Protocol: corev1.ProtocolTCP, Port: 53, TargetPort: intstr.FromInt32(int32(port))},
		},
	}
	if err := c.client.Create(ctx, svc); err != nil {
		return err
	}
	slice := &discoveryv1.EndpointSlice{}
	slice.Name, slice.Namespace = dnsSlice, "kube-system"
	slice.Labels = map[string]string{
		discoveryv1.LabelServiceName: DNSService,
		discoveryv1.LabelManagedBy:   fieldManager,
	}
	slice.AddressType = discoveryv1.AddressTypeIPv4
	slice.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{c.nodeIP}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}}
	slice.Ports = []discoveryv1.EndpointPort{
		{Name: ptr.To("dns"), Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To(int32(port))},
		{Name: ptr.To("dns-tcp"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(int32(port))},
	}
	return c.client.Create(ctx, slice)
}
