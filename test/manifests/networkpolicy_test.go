package manifests

import (
	"encoding/json"
	"net/netip"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// peer is a client of the manager's pods: a pod (its labels and namespace),
// or, with pod nil, an address that is no pod (the API server, a node); ip
// is its address.
type peer struct {
	name      string
	pod       map[string]string
	namespace string
	ip        string
}

// matchingPods says how a network plugin evaluates ipBlocks: Calico matches
// any source address against them, pods' included; Cilium matches pods by
// their identity only, so an ipBlock admits no pod.
type ipBlocks int

const (
	ipBlocksMatchNoPod ipBlocks = iota
	ipBlocksMatchAny
)

// inBlock says whether ip lies in b's cidr and in none of its excepts.
func inBlock(t *testing.T, b *networkingv1.IPBlock, ip string) bool {
	t.Helper()
	addr := netip.MustParseAddr(ip)
	cidr, err := netip.ParsePrefix(b.CIDR)
	if err != nil {
		t.Fatalf("ipBlock %q: %v", b.CIDR, err)
	}
	if !cidr.Contains(addr) {
		return false
	}
	for _, e := range b.Except {
		ex, err := netip.ParsePrefix(e)
		if err != nil {
			t.Fatalf("except %q: %v", e, err)
		}
		if ex.Addr().Is4() != cidr.Addr().Is4() || ex.Bits() <= cidr.Bits() || !cidr.Contains(ex.Addr()) {
			t.Errorf("except %s is not a strict subset of %s: the API server refuses it", e, b.CIDR)
		}
		if ex.Contains(addr) {
			return false
		}
	}
	return true
}

// policyAllows says whether np lets p connect to the port named port of the
// selected pods' container c, as a network plugin that evaluates ipBlocks
// as mode says does.
func policyAllows(t *testing.T, np *networkingv1.NetworkPolicy, c corev1.Container, p peer, port string, mode ipBlocks) bool {
	t.Helper()
	matches := func(sel *metav1.LabelSelector, l map[string]string) bool {
		if sel == nil {
			return true
		}
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			t.Fatalf("%s: selector %v: %v", np.Name, sel, err)
		}
		return s.Matches(labels.Set(l))
	}
	i := slices.IndexFunc(c.Ports, func(cp corev1.ContainerPort) bool { return cp.Name == port })
	if i < 0 {
		t.Fatalf("container %s has no port %s", c.Name, port)
	}
	for _, rule := range np.Spec.Ingress {
		portOK := len(rule.Ports) == 0
		for _, rp := range rule.Ports {
			proto := corev1.ProtocolTCP
			if rp.Protocol != nil {
				proto = *rp.Protocol
			}
			if proto == c.Ports[i].Protocol && rp.Port != nil && (rp.Port.StrVal == port || rp.Port.IntVal == c.Ports[i].ContainerPort) {
				portOK = true
			}
		}
		if !portOK {
			continue
		}
		if len(rule.From) == 0 {
			return true
		}
		for _, f := range rule.From {
			if f.IPBlock != nil {
				if (p.pod == nil || mode == ipBlocksMatchAny) && inBlock(t, f.IPBlock, p.ip) {
					return true
				}
				continue
			}
			if p.pod == nil {
				continue
			}
			nsOK := f.NamespaceSelector == nil && p.namespace == np.Namespace ||
				f.NamespaceSelector != nil && matches(f.NamespaceSelector, map[string]string{"kubernetes.io/metadata.name": p.namespace})
			if nsOK && matches(f.PodSelector, p.pod) {
				return true
			}
		}
	}
	return false
}

// checkNetworkPolicy checks the manager's NetworkPolicy in docs against its
// Deployment: it selects the manager's pods, restricts ingress only, names
// ports the container has, and lets training pods (pods of a JobSet, in any
// namespace) and only them reach the status server, no pod but addresses
// that are no pod's (the API server, the kubelet) reach the webhooks and
// health probes, and only the pods of the namespace monitoring the metrics;
// ipBlocks evaluated as mode says.
func checkNetworkPolicy(t *testing.T, docs []doc, mode ipBlocks) {
	t.Helper()
	np := decodeInto[networkingv1.NetworkPolicy](t, findIn(t, docs, "NetworkPolicy", managerName))
	dep := decodeInto[appsv1.Deployment](t, findIn(t, docs, "Deployment", managerName))
	if np.Namespace != dep.Namespace {
		t.Errorf("NetworkPolicy in namespace %q, the manager in %q", np.Namespace, dep.Namespace)
	}
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(dep.Spec.Template.Labels)) {
		t.Errorf("podSelector %v does not select the manager's pods %v (%v)", np.Spec.PodSelector, dep.Spec.Template.Labels, err)
	}
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		t.Errorf("policyTypes %v, want [Ingress] (egress unrestricted)", np.Spec.PolicyTypes)
	}
	c := dep.Spec.Template.Spec.Containers[0]
	jobset := map[string]string{"jobset.sigs.k8s.io/jobset-name": "mnist", "jobset.sigs.k8s.io/replicatedjob-name": "node"}
	other := map[string]string{"app": "curl"}
	prometheus := map[string]string{"app.kubernetes.io/name": "prometheus"}
	type want struct{ statusServer, webhook, metrics bool }
	for _, tc := range []struct {
		peer
		want
	}{
		{peer{"training pod in another namespace", jobset, "team-a", "10.244.1.5"}, want{statusServer: true}},
		{peer{"training pod in the manager's namespace", jobset, dep.Namespace, "10.244.2.5"}, want{statusServer: true}},
		{peer{"other pod in another namespace", other, "team-a", "10.244.1.6"}, want{}},
		{peer{"other pod in the manager's namespace", other, dep.Namespace, "10.244.2.6"}, want{}},
		{peer{"unlabelled pod", map[string]string{}, "default", "10.244.3.7"}, want{}},
		{peer{"Prometheus in monitoring", prometheus, "monitoring", "10.244.3.8"}, want{metrics: true}},
		{peer{"an IPv6 pod", other, "team-a", "fd01:0:0:1::5"}, want{}},
		{peer{"no pod: the API server, a node", nil, "", "192.168.1.10"}, want{webhook: true}},
		{peer{"no pod: an IPv6 node", nil, "", "fd00::10"}, want{webhook: true}},
	} {
		for port, want := range map[string]bool{"status-server": tc.statusServer, "webhook-server": tc.webhook, "metrics": tc.metrics, "health": tc.webhook} {
			if got := policyAllows(t, np, c, tc.peer, port, mode); got != want {
				t.Errorf("%s -> port %s: allowed %v, want %v", tc.name, port, got, want)
			}
		}
	}
}

// podCIDRs are the pod ranges of the peers of checkNetworkPolicy.
var podCIDRs = []any{"10.244.0.0/16", "fd01::/48"}

// TestNetworkPolicy: manifests/base's NetworkPolicy (the chart's is the
// same object, TestChartDefaults), on a plugin whose ipBlocks match no pod;
// with the pod ranges excepted (a patch, as docs/security.md shows) also on
// one whose ipBlocks match pods' addresses.
func TestNetworkPolicy(t *testing.T) {
	docs := render(t, "manifests/base")
	checkNetworkPolicy(t, docs, ipBlocksMatchNoPod)
	i := slices.IndexFunc(docs, func(d doc) bool { return d.kind() == "NetworkPolicy" && d.name() == managerName })
	rules := docs[i].obj["spec"].(map[string]any)["ingress"].([]any)
	for _, from := range rules[1].(map[string]any)["from"].([]any) {
		b := from.(map[string]any)["ipBlock"].(map[string]any)
		for _, c := range podCIDRs {
			if strings.Contains(c.(string), ":") == strings.Contains(b["cidr"].(string), ":") {
				ex, _ := b["except"].([]any)
				b["except"] = append(ex, c)
			}
		}
	}
	var err error
	if docs[i].json, err = json.Marshal(docs[i].obj); err != nil {
		t.Fatal(err)
	}
	checkNetworkPolicy(t, docs, ipBlocksMatchAny)
}

// TestChartNetworkPolicy: the chart's NetworkPolicy by default, with another
// metrics port, and with networkPolicy.podCIDRs (then on a plugin whose
// ipBlocks match pods' addresses too); another metricsFrom; none with
// networkPolicy.enabled=false or the older statusServer.networkPolicy.enabled=false;
// without the status server, no rule for it.
func TestChartNetworkPolicy(t *testing.T) {
	checkNetworkPolicy(t, renderChart(t, systemNamespace, nil), ipBlocksMatchNoPod)
	checkNetworkPolicy(t, renderChart(t, "ml", map[string]any{"metrics": map[string]any{"port": 9090}}), ipBlocksMatchNoPod)
	withPodCIDRs := renderChart(t, systemNamespace, map[string]any{"networkPolicy": map[string]any{"podCIDRs": podCIDRs}})
	checkNetworkPolicy(t, withPodCIDRs, ipBlocksMatchNoPod)
	checkNetworkPolicy(t, withPodCIDRs, ipBlocksMatchAny)

	docs := renderChart(t, systemNamespace, map[string]any{"networkPolicy": map[string]any{"metricsFrom": []any{
		map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "observability"}},
			"podSelector": map[string]any{"matchLabels": map[string]any{"app": "vmagent"}}}}}})
	np := decodeInto[networkingv1.NetworkPolicy](t, findIn(t, docs, "NetworkPolicy", managerName))
	dep := decodeInto[appsv1.Deployment](t, findIn(t, docs, "Deployment", managerName))
	for _, tc := range []struct {
		peer
		want bool
	}{
		{peer{"vmagent", map[string]string{"app": "vmagent"}, "observability", "10.244.0.9"}, true},
		{peer{"another pod there", map[string]string{"app": "x"}, "observability", "10.244.0.8"}, false},
		{peer{"vmagent in monitoring", map[string]string{"app": "vmagent"}, "monitoring", "10.244.0.7"}, false},
	} {
		if got := policyAllows(t, np, dep.Spec.Template.Spec.Containers[0], tc.peer, "metrics", ipBlocksMatchNoPod); got != tc.want {
			t.Errorf("metricsFrom observability/vmagent: %s -> metrics: %v, want %v", tc.name, got, tc.want)
		}
	}

	for _, values := range []map[string]any{
		{"networkPolicy": map[string]any{"enabled": false}},
		{"statusServer": map[string]any{"networkPolicy": map[string]any{"enabled": false}}},
	} {
		if docs := renderChart(t, systemNamespace, values); slices.ContainsFunc(docs, func(d doc) bool { return d.kind() == "NetworkPolicy" }) {
			t.Errorf("%v: a NetworkPolicy is rendered", values)
		}
	}
	docs = renderChart(t, systemNamespace, map[string]any{"statusServer": map[string]any{"enabled": false}})
	np = decodeInto[networkingv1.NetworkPolicy](t, findIn(t, docs, "NetworkPolicy", managerName))
	for _, r := range np.Spec.Ingress {
		for _, p := range r.Ports {
			if p.Port.StrVal == "status-server" {
				t.Errorf("without the status server, a rule for its port: %v", r)
			}
		}
	}
}
