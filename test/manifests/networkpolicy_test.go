package manifests

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// peer is a client of the manager's pods: a pod (its labels and namespace),
// or, with pod nil, an address that is no pod (the API server, a node).
type peer struct {
	name      string
	pod       map[string]string
	namespace string
}

// policyAllows says whether np lets p connect to the port named port of the
// selected pods' container c, as a network plugin evaluates it (ipBlocks
// match no pod here; none is expected).
func policyAllows(t *testing.T, np *networkingv1.NetworkPolicy, c corev1.Container, p peer, port string) bool {
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
			if f.IPBlock != nil || p.pod == nil {
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
// namespace) and only them reach the status server, while anyone reaches the
// webhooks, metrics and health probes.
func checkNetworkPolicy(t *testing.T, docs []doc) {
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
	for _, tc := range []struct {
		peer
		statusServer bool
	}{
		{peer{"training pod in another namespace", jobset, "team-a"}, true},
		{peer{"training pod in the manager's namespace", jobset, dep.Namespace}, true},
		{peer{"other pod in another namespace", other, "team-a"}, false},
		{peer{"other pod in the manager's namespace", other, dep.Namespace}, false},
		{peer{"unlabelled pod", map[string]string{}, "default"}, false},
		{peer{"no pod (API server, node, outside)", nil, ""}, false},
	} {
		for port, want := range map[string]bool{"status-server": tc.statusServer, "webhook-server": true, "metrics": true, "health": true} {
			if got := policyAllows(t, np, c, tc.peer, port); got != want {
				t.Errorf("%s -> port %s: allowed %v, want %v", tc.name, port, got, want)
			}
		}
	}
}

// TestNetworkPolicy: manifests/base's NetworkPolicy (the chart's is the
// same object, TestChartDefaults).
func TestNetworkPolicy(t *testing.T) {
	checkNetworkPolicy(t, render(t, "manifests/base"))
}

// TestChartNetworkPolicy: the chart's NetworkPolicy by default and with
// another metrics port; none with statusServer.networkPolicy.enabled=false
// or without the status server.
func TestChartNetworkPolicy(t *testing.T) {
	checkNetworkPolicy(t, renderChart(t, systemNamespace, nil))
	checkNetworkPolicy(t, renderChart(t, "ml", map[string]any{"metrics": map[string]any{"port": 9090}}))
	for _, values := range []map[string]any{
		{"statusServer": map[string]any{"networkPolicy": map[string]any{"enabled": false}}},
		{"statusServer": map[string]any{"enabled": false}},
	} {
		if docs := renderChart(t, systemNamespace, values); slices.ContainsFunc(docs, func(d doc) bool { return d.kind() == "NetworkPolicy" }) {
			t.Errorf("%v: a NetworkPolicy is rendered", values)
		}
	}
}
