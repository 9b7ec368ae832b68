package manifests

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// The Helm chart (manifests/charts/trainyard). The tests render it with
// bin/helm, built from test/tools/helm by `make helm`, and skip without it.
const (
	chartDir     = "manifests/charts/trainyard"
	chartRelease = "trainyard"
	// runtimeAPI is what a cluster that serves ClusterTrainingRuntimes lists in
	// its capabilities; the chart renders its runtimes only then (or with
	// crds.enabled=false).
	runtimeAPI = "trainer.kubeflow.org/v1alpha1/ClusterTrainingRuntime"
	// The label that exempts the chart's runtimes from the runtime webhooks.
	webhookValidationLabel = "trainer.kubeflow.org/webhook-validation"
	resourcePolicy         = "helm.sh/resource-policy"
	serviceMonitorKind     = "ServiceMonitor"
	// How to bring the chart's copies of generated files and runtimes up to date.
	syncChart = "update the chart's copies with test/tools/helm/sync-chart.sh"
)

// baseCRDFiles returns the CRD files that manifests/base installs: the
// resources of manifests/base/crds/kustomization.yaml.
func baseCRDFiles(t *testing.T) []string {
	t.Helper()
	k, ok := base(t).kustomizations["manifests/base/crds"]
	if !ok || len(k.Resources) == 0 {
		t.Fatal("manifests/base/crds/kustomization.yaml lists no CRDs")
	}
	out := slices.Clone(k.Resources)
	slices.Sort(out)
	return out
}

// helmBin returns bin/helm, or skips the test.
func helmBin(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join(repoRoot, "bin", "helm"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
		t.Skipf("bin/helm not found: run `make chart-test` (or `make helm`, which builds it from test/tools/helm) to test the Helm chart")
	}
	return p
}

// helmEnv keeps helm away from the user's Helm configuration and caches.
var helmEnv = sync.OnceValue(func() []string {
	dir, err := os.MkdirTemp("", "trainyard-helm-home")
	if err != nil {
		panic(err)
	}
	return append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(dir, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(dir, "config"),
		"HELM_DATA_HOME="+filepath.Join(dir, "data"),
	)
})

// runHelm runs bin/helm in the repository root and returns its stdout.
func runHelm(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(helmBin(t), args...)
	cmd.Dir = repoRoot
	cmd.Env = helmEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return out, nil
}

// valuesFile writes chart values to a file for --values.
func valuesFile(t *testing.T, values map[string]any) string {
	t.Helper()
	b, err := yaml.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// renderChart runs `helm template` in the given release namespace with the
// given values and extra flags, and returns the rendered objects.
func renderChart(t *testing.T, namespace string, values map[string]any, flags ...string) []doc {
	t.Helper()
	out := renderChartYAML(t, namespace, values, flags...)
	docs, err := decodeDocs("helm template", bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

func renderChartYAML(t *testing.T, namespace string, values map[string]any, flags ...string) []byte {
	t.Helper()
	args := []string{"template", chartRelease, chartDir, "--namespace", namespace}
	if values != nil {
		args = append(args, "--values", valuesFile(t, values))
	}
	out, err := runHelm(t, append(args, flags...)...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// nonDefaultValues change every value that changes what the chart renders,
// but metrics.certSecret, which needs the metrics.secure that these turn off
// (TestChartValueVariants covers it).
func nonDefaultValues() map[string]any {
	return map[string]any{
		"namespace":        map[string]any{"create": false, "name": "ml-platform"},
		"image":            map[string]any{"repository": "registry.example.com/mirror/trainyard-manager", "tag": "v9.9.9", "pullPolicy": "Always"},
		"imagePullSecrets": []any{map[string]any{"name": "mirror-credentials"}},
		"replicaCount":     2,
		"leaderElection":   map[string]any{"enabled": true, "leaseDuration": "4s", "renewDeadline": "3s", "retryPeriod": "500ms"},
		"kueue":            map[string]any{"mode": "jobset"},
		"clusterDomain":    "corp.example",
		"pytorchJob":       map[string]any{"gangSchedulerName": "volcano"},
		"webhook":          map[string]any{"certManager": map[string]any{"enabled": true}},
		"metrics": map[string]any{
			"secure": false, "port": 9090,
			"readerServiceAccounts": []any{map[string]any{"name": "prometheus-k8s", "namespace": "monitoring"}},
			"serviceMonitor": map[string]any{
				"enabled": true, "labels": map[string]any{"release": "prometheus"}, "interval": "15s",
			},
		},
		"rbac":              map[string]any{"clusterTrainingRuntimesReadableByAll": false},
		"runtimes":          map[string]any{"enabled": false},
		"resources":         map[string]any{"requests": map[string]any{"cpu": "250m", "memory": "256Mi"}, "limits": map[string]any{"cpu": "2", "memory": "1Gi"}},
		"nodeSelector":      map[string]any{"node-role.kubernetes.io/control-plane": ""},
		"tolerations":       []any{map[string]any{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}},
		"priorityClassName": "system-cluster-critical",
		"podAnnotations":    map[string]any{"example.com/team": "platform"},
		"extraArgs":         []any{"--zap-log-level=debug", "--trainjob-concurrency=10"},
	}
}

const nonDefaultNamespace = "ml-platform"

// TestChartFilesInSync checks that the chart's copies of the generated CRDs,
// ClusterRole and webhook configurations, and of the runtime catalog, are
// identical to their sources, which the chart cannot reference directly (Helm
// reads only files inside the chart). It needs no helm.
func TestChartFilesInSync(t *testing.T) {
	runtimeFiles, err := filepath.Glob(filepath.Join(repoRoot, "runtimes", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range runtimeFiles {
		runtimeFiles[i] = filepath.Base(p)
	}
	for _, c := range []struct {
		src, dst string
		files    []string
	}{
		{"manifests/base/crds", chartDir + "/files/crds", baseCRDFiles(t)},
		{"manifests/base/rbac", chartDir + "/files/rbac", []string{"role.yaml"}},
		{"manifests/base/webhook", chartDir + "/files/webhook", []string{"manifests.yaml"}},
		{"runtimes", chartDir + "/files/runtimes", runtimeFiles},
	} {
		if len(c.files) == 0 {
			t.Fatalf("no files in %s", c.src)
		}
		dst, err := filepath.Glob(filepath.Join(repoRoot, c.dst, "*"))
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range dst {
			dst[i] = filepath.Base(p)
		}
		if diff := cmp.Diff(c.files, dst); diff != "" {
			t.Errorf("files in %s differ from those of %s (-source +chart); %s\n%s", c.dst, c.src, syncChart, diff)
			continue
		}
		for _, name := range c.files {
			want, err := os.ReadFile(filepath.Join(repoRoot, c.src, name))
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(repoRoot, c.dst, name))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(want, got) {
				t.Errorf("%s/%s is stale: it differs from %s/%s; %s", c.dst, name, c.src, name, syncChart)
			}
		}
	}
}

// TestChartLint runs `helm lint --strict` with the default and non-default values.
func TestChartLint(t *testing.T) {
	for name, values := range map[string]map[string]any{"default values": nil, "non-default values": nonDefaultValues()} {
		t.Run(name, func(t *testing.T) {
			args := []string{"lint", "--strict", chartDir, "--namespace", systemNamespace}
			if values != nil {
				args = append(args, "--values", valuesFile(t, values))
			}
			if _, err := runHelm(t, args...); err != nil {
				t.Error(err)
			}
		})
	}
}

// checkChartObjects checks that rendered objects decode strictly into their
// API types, that namespaced ones are in namespace ns and cluster-scoped ones
// have none, and that no object is rendered twice. It returns their kind/name
// keys.
func checkChartObjects(t *testing.T, docs []doc, ns string) map[string]bool {
	t.Helper()
	got := map[string]bool{}
	for _, d := range docs {
		key := d.kind() + "/" + d.name()
		if got[key] {
			t.Errorf("%s is rendered twice", key)
		}
		got[key] = true
		var namespaced bool
		switch d.kind() {
		case "Issuer", "Certificate":
			namespaced = true
		case serviceMonitorKind:
			namespaced = true
			if d.apiVersion() != "monitoring.coreos.com/v1" {
				t.Errorf("%s: apiVersion %s, want monitoring.coreos.com/v1", d, d.apiVersion())
			}
		case trainer.ClusterTrainingRuntimeKind:
			if err := yaml.UnmarshalStrict(d.json, &trainer.ClusterTrainingRuntime{}); err != nil {
				t.Errorf("%s: does not decode strictly into ClusterTrainingRuntime: %v", d, err)
			}
		default:
			ty, ok := typed[d.kind()]
			if !ok {
				t.Errorf("unexpected kind in the chart's output: %s", d)
				continue
			}
			namespaced = ty.namespaced
			if d.apiVersion() != ty.apiVersion {
				t.Errorf("%s: apiVersion %s, want %s", d, d.apiVersion(), ty.apiVersion)
			}
			if err := yaml.UnmarshalStrict(d.json, ty.new()); err != nil {
				t.Errorf("%s: does not decode strictly into %s: %v", d, d.kind(), err)
			}
		}
		switch {
		case namespaced && d.namespace() != ns:
			t.Errorf("%s: namespace %q, want %q", d, d.namespace(), ns)
		case !namespaced && d.namespace() != "":
			t.Errorf("%s: cluster-scoped object has namespace %q", d, d.namespace())
		}
		labels, _ := meta(d.obj)["labels"].(map[string]any)
		for k, want := range map[string]string{
			"app.kubernetes.io/name":       "trainyard",
			"app.kubernetes.io/instance":   chartRelease,
			"app.kubernetes.io/managed-by": "Helm",
		} {
			if got := str(labels[k]); got != want {
				t.Errorf("%s: label %s=%q, want %q", d, k, got, want)
			}
		}
	}
	return got
}

// chartBaseDiff compares an object rendered by the chart with the same object
// rendered by kustomize, apart from what the chart adds: labels (the
// kustomize labels must be among the chart's), the keep policy on CRDs,
// explicit --kueue-mode and --cluster-domain arguments with the manager's defaults, and the
// objectSelector of the runtime webhooks. The image is compared by name only.
// It returns a diff, or "" if they match.
func chartBaseDiff(t *testing.T, chart, base doc) string {
	t.Helper()
	norm := func(d doc, isChart bool) map[string]any {
		var obj map[string]any
		if err := json.Unmarshal(d.json, &obj); err != nil {
			t.Fatal(err)
		}
		m := meta(obj)
		delete(m, "labels")
		if ann, ok := m["annotations"].(map[string]any); ok && isChart && d.kind() == "CustomResourceDefinition" {
			if ann[resourcePolicy] != "keep" {
				t.Errorf("%s: annotation %s=%v, want keep (crds.keep defaults to true)", d, resourcePolicy, ann[resourcePolicy])
			}
			delete(ann, resourcePolicy)
		}
		switch d.kind() {
		case "Deployment":
			tmpl := obj["spec"].(map[string]any)["template"].(map[string]any)
			delete(tmpl["metadata"].(map[string]any), "labels")
			for _, c := range tmpl["spec"].(map[string]any)["containers"].([]any) {
				c := c.(map[string]any)
				img, _, _ := strings.Cut(str(c["image"]), ":")
				c["image"] = img
				if isChart {
					args, _ := c["args"].([]any)
					c["args"] = slices.DeleteFunc(args, func(a any) bool {
						return a == "--kueue-mode=trainjob" || a == "--cluster-domain=cluster.local"
					})
				}
			}
		case "ValidatingWebhookConfiguration":
			if isChart {
				for _, w := range obj["webhooks"].([]any) {
					delete(w.(map[string]any), "objectSelector")
				}
			}
		}
		return obj
	}
	// The kustomize labels, on the object and on the Deployment's pods, must be
	// among the chart's.
	labelsOf := func(obj map[string]any) map[string]any {
		l, _ := meta(obj)["labels"].(map[string]any)
		return l
	}
	checkSubset := func(what string, base, chart map[string]any) {
		for k, v := range base {
			if chart[k] != v {
				t.Errorf("%s: label %s=%v of manifests/base is %v in the chart", what, k, v, chart[k])
			}
		}
	}
	checkSubset(chart.String(), labelsOf(base.obj), labelsOf(chart.obj))
	if chart.kind() == "Deployment" {
		tmpl := func(d doc) map[string]any {
			return d.obj["spec"].(map[string]any)["template"].(map[string]any)
		}
		checkSubset(chart.String()+" pod template", labelsOf(tmpl(base)), labelsOf(tmpl(chart)))
	}
	return cmp.Diff(norm(base, false), norm(chart, true))
}

// compareWithKustomize checks that the chart renders the same objects as a
// kustomization, and each the same way (see chartBaseDiff), plus the chart's
// runtimes when wantRuntimes.
func compareWithKustomize(t *testing.T, chart []doc, kustomizeDir string, wantRuntimes bool) {
	t.Helper()
	base := render(t, kustomizeDir)
	want := map[string]bool{}
	for _, d := range base {
		want[d.kind()+"/"+d.name()] = true
	}
	if wantRuntimes {
		for name := range catalog {
			want[trainer.ClusterTrainingRuntimeKind+"/"+name] = true
		}
	}
	got := map[string]bool{}
	for _, d := range chart {
		got[d.kind()+"/"+d.name()] = true
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("objects of the chart differ from those of %s (-kustomize +chart):\n%s", kustomizeDir, diff)
	}
	for _, b := range base {
		i := slices.IndexFunc(chart, func(c doc) bool { return c.kind() == b.kind() && c.name() == b.name() })
		if i < 0 {
			continue // reported above
		}
		if diff := chartBaseDiff(t, chart[i], b); diff != "" {
			t.Errorf("%s differs from %s in %s (-kustomize +chart):\n%s", chart[i], b.kind()+"/"+b.name(), kustomizeDir, diff)
		}
	}
}

// TestChartDefaults renders the chart with its default values, for a cluster
// that already serves the runtime API, and checks that it is the kustomize
// base (manifests/overlays/standalone), object by object, plus the runtime
// catalog; that the runtimes are those of runtimes/, exempt from the runtime
// webhooks; and that the chart's RBAC rules are the base's.
func TestChartDefaults(t *testing.T) {
	docs := renderChart(t, systemNamespace, nil, "--api-versions", runtimeAPI)
	checkChartObjects(t, docs, systemNamespace)
	compareWithKustomize(t, docs, "manifests/overlays/standalone", true)

	// The image defaults to the chart's appVersion.
	dep := decodeInto[appsv1.Deployment](t, findIn(t, docs, "Deployment", managerName))
	c := dep.Spec.Template.Spec.Containers[0]
	if want := managerImage + ":" + chartAppVersion(t); c.Image != want {
		t.Errorf("image %q, want %q", c.Image, want)
	}
	if want := "--kueue-mode=" + managerFlagValue(t, nil, "kueue-mode"); !testing.Short() && !slices.Contains(c.Args, want) {
		t.Errorf("args %q: the default kueue.mode must be the manager's default (%s)", c.Args, want)
	}
	if want := "--cluster-domain=" + managerFlagValue(t, nil, "cluster-domain"); !testing.Short() && !slices.Contains(c.Args, want) {
		t.Errorf("args %q: the default clusterDomain must be the manager's default (%s)", c.Args, want)
	}

	// The runtimes are runtimes/*.yaml with the chart's labels.
	files := loadRuntimes(t)
	for _, d := range docs {
		if d.kind() != trainer.ClusterTrainingRuntimeKind {
			continue
		}
		rt := decodeInto[trainer.ClusterTrainingRuntime](t, d)
		src, ok := files[rt.Name]
		if !ok {
			t.Errorf("%s is not in runtimes/", d)
			continue
		}
		if diff := cmp.Diff(src.Spec, rt.Spec); diff != "" {
			t.Errorf("%s: spec differs from runtimes/%s.yaml (-file +chart):\n%s", d, rt.Name, diff)
		}
		for k, v := range src.Labels {
			if rt.Labels[k] != v {
				t.Errorf("%s: label %s=%q of runtimes/%s.yaml is %q", d, k, v, rt.Name, rt.Labels[k])
			}
		}
		if rt.Labels[webhookValidationLabel] != "disabled" {
			t.Errorf("%s: label %s=%q, want disabled (the chart creates it before the webhooks are served)", d, webhookValidationLabel, rt.Labels[webhookValidationLabel])
		}
	}

	// The runtime webhooks, and only they, skip runtimes with that label.
	wantSelector := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: webhookValidationLabel, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"disabled"},
	}}}
	vwc := decodeInto[admissionregistrationv1.ValidatingWebhookConfiguration](t, findIn(t, docs, "ValidatingWebhookConfiguration", validatingWebhookName))
	for _, w := range vwc.Webhooks {
		isRuntime := slices.ContainsFunc(w.Rules, func(r admissionregistrationv1.RuleWithOperations) bool {
			return slices.Contains(r.Resources, "clustertrainingruntimes") || slices.Contains(r.Resources, "trainingruntimes")
		})
		var want *metav1.LabelSelector
		if isRuntime {
			want = wantSelector
		}
		if diff := cmp.Diff(want, w.ObjectSelector); diff != "" {
			t.Errorf("webhook %s: objectSelector (-want +got):\n%s", w.Name, diff)
		}
	}
	checkWebhookPolicies(t, webhooksIn(t, docs))
}

// TestChartRBAC checks that every Role and ClusterRole of the chart has
// exactly the rules and aggregation labels of the one of the same kind and
// name in manifests/base, with the default values and with the non-default
// ones (where the chart leaves out what it does not need), and that the
// bindings name the manager's ServiceAccount in the chart's namespace, or for
// the user-facing roles whom the values say.
func TestChartRBAC(t *testing.T) {
	baseRoles := map[string][]rbacv1.PolicyRule{}
	baseLabels := map[string]map[string]string{}
	for _, d := range base(t).docs {
		if d.kind() == "Role" || d.kind() == "ClusterRole" {
			baseRoles[d.kind()+"/"+d.name()] = policyRules(t, d)
			baseLabels[d.kind()+"/"+d.name()] = aggregationLabels(d)
		}
	}
	// The roles for users, always rendered.
	userRoles := []string{"ClusterRole/" + viewRole, "ClusterRole/" + editRole, "ClusterRole/" + metricsReaderRole, "Role/" + publicConfigMapReaderRole}
	for _, tc := range []struct {
		name, ns  string
		values    map[string]any
		wantRoles []string
		// Subjects of the bindings of the user-facing roles; the others bind
		// the manager.
		wantSubjects map[string][]rbacv1.Subject
	}{
		{"default values", systemNamespace, nil, append([]string{
			"ClusterRole/" + managerName, "Role/" + leaderElectionRole, "Role/" + certRotationRole, "ClusterRole/" + certRotationRole,
			"ClusterRole/" + runtimeReaderRole,
		}, userRoles...), map[string][]rbacv1.Subject{runtimeReaderRole: allAuthenticated, publicConfigMapReaderRole: allAuthenticated}},
		// cert-manager: no rotation RBAC; the runtimes only for those the
		// cluster admin lets read them; a metrics reader.
		{"non-default values", nonDefaultNamespace, nonDefaultValues(), append([]string{"ClusterRole/" + managerName, "Role/" + leaderElectionRole}, userRoles...),
			map[string][]rbacv1.Subject{metricsReaderRole: {{Kind: "ServiceAccount", Name: "prometheus-k8s", Namespace: "monitoring"}},
				publicConfigMapReaderRole: allAuthenticated}},
		// No leader election: no Lease permissions.
		{"leader election off", systemNamespace, map[string]any{"leaderElection": map[string]any{"enabled": false}}, append([]string{
			"ClusterRole/" + managerName, "Role/" + certRotationRole, "ClusterRole/" + certRotationRole, "ClusterRole/" + runtimeReaderRole,
		}, userRoles...), map[string][]rbacv1.Subject{runtimeReaderRole: allAuthenticated, publicConfigMapReaderRole: allAuthenticated}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			docs := renderChart(t, tc.ns, tc.values)
			var roles []string
			bound := map[string]bool{}
			for _, d := range docs {
				switch d.kind() {
				case "Role", "ClusterRole":
					key := d.kind() + "/" + d.name()
					roles = append(roles, key)
					want, ok := baseRoles[key]
					if !ok {
						t.Errorf("%s is not in manifests/base", d)
						continue
					}
					if diff := cmp.Diff(want, policyRules(t, d)); diff != "" {
						t.Errorf("%s: rules differ from manifests/base (-base +chart):\n%s", d, diff)
					}
					if diff := cmp.Diff(baseLabels[key], aggregationLabels(d)); diff != "" {
						t.Errorf("%s: aggregation labels differ from manifests/base (-base +chart):\n%s", d, diff)
					}
					if d.kind() == "Role" && d.namespace() != tc.ns {
						t.Errorf("%s: namespace %q, want %q", d, d.namespace(), tc.ns)
					}
				case "RoleBinding":
					rb := decodeInto[rbacv1.RoleBinding](t, d)
					want, ok := tc.wantSubjects[d.name()]
					if !ok {
						want = managerSubjects(tc.ns)
					}
					checkBinding(t, d, rb.RoleRef, rb.Subjects, want)
					bound[rb.RoleRef.Kind+"/"+rb.RoleRef.Name] = true
				case "ClusterRoleBinding":
					crb := decodeInto[rbacv1.ClusterRoleBinding](t, d)
					want, ok := tc.wantSubjects[d.name()]
					if !ok {
						want = managerSubjects(tc.ns)
					}
					checkBinding(t, d, crb.RoleRef, crb.Subjects, want)
					bound[crb.RoleRef.Kind+"/"+crb.RoleRef.Name] = true
				}
			}
			slices.Sort(roles)
			slices.Sort(tc.wantRoles)
			if diff := cmp.Diff(tc.wantRoles, roles); diff != "" {
				t.Errorf("roles (-want +got):\n%s", diff)
			}
			for _, r := range roles {
				// The user roles are aggregated, and the metrics reader is
				// bound only to the readers the values name.
				_, name, _ := strings.Cut(r, "/")
				unboundByDesign := slices.Contains(aggregatedRoles, name) || name == metricsReaderRole && tc.wantSubjects[name] == nil
				if bound[r] == unboundByDesign {
					t.Errorf("%s: bound %v, want %v", r, bound[r], !unboundByDesign)
				}
			}
		})
	}
}

// aggregationLabels returns the labels of a role that aggregate it into others.
func aggregationLabels(d doc) map[string]string {
	out := map[string]string{}
	labels, _ := meta(d.obj)["labels"].(map[string]any)
	for k, v := range labels {
		if strings.HasPrefix(k, "rbac.authorization.") {
			out[k] = str(v)
		}
	}
	return out
}

// managerSubjects are the subjects of the manager's bindings.
func managerSubjects(ns string) []rbacv1.Subject {
	return []rbacv1.Subject{{Kind: "ServiceAccount", Name: managerName, Namespace: ns}}
}

func checkBinding(t *testing.T, d doc, ref rbacv1.RoleRef, subjects, want []rbacv1.Subject) {
	t.Helper()
	if ref.Name != d.name() || ref.APIGroup != rbacv1.GroupName {
		t.Errorf("%s: roleRef %+v, want the role of the same name", d, ref)
	}
	if d.kind() == "RoleBinding" && ref.Kind != "Role" || d.kind() == "ClusterRoleBinding" && ref.Kind != "ClusterRole" {
		t.Errorf("%s: roleRef kind %s", d, ref.Kind)
	}
	if diff := cmp.Diff(want, subjects); diff != "" {
		t.Errorf("%s subjects (-want +got):\n%s", d, diff)
	}
}

// TestChartFirstInstall checks what the chart renders for a cluster that does
// not serve the runtime API yet: no runtimes while the chart creates the CRDs
// (Helm could not map them), but with crds.enabled=false the runtimes are
// there (the CRDs are the operator's job then), and no CRDs.
func TestChartFirstInstall(t *testing.T) {
	kinds := func(docs []doc) map[string]int {
		n := map[string]int{}
		for _, d := range docs {
			n[d.kind()]++
		}
		return n
	}
	nCRDs := len(baseCRDFiles(t))
	got := kinds(renderChart(t, systemNamespace, nil))
	if got[trainer.ClusterTrainingRuntimeKind] != 0 || got["CustomResourceDefinition"] != nCRDs {
		t.Errorf("first install with the chart's CRDs: %d runtimes and %d CRDs, want 0 and %d", got[trainer.ClusterTrainingRuntimeKind], got["CustomResourceDefinition"], nCRDs)
	}
	got = kinds(renderChart(t, systemNamespace, map[string]any{"crds": map[string]any{"enabled": false}}))
	if got[trainer.ClusterTrainingRuntimeKind] != len(catalog) || got["CustomResourceDefinition"] != 0 {
		t.Errorf("crds.enabled=false: %d runtimes and %d CRDs, want %d and 0", got[trainer.ClusterTrainingRuntimeKind], got["CustomResourceDefinition"], len(catalog))
	}
	// crds.keep=false drops the keep policy.
	for _, d := range renderChart(t, systemNamespace, map[string]any{"crds": map[string]any{"keep": false}}) {
		if d.kind() != "CustomResourceDefinition" {
			continue
		}
		if ann, _ := meta(d.obj)["annotations"].(map[string]any); ann[resourcePolicy] != nil {
			t.Errorf("%s: crds.keep=false, but annotation %s=%v", d, resourcePolicy, ann[resourcePolicy])
		}
	}
}

// TestChartCertManager checks webhook.certManager.enabled against the
// cert-manager overlay: the same objects, each the same way (the Issuer and
// Certificate included).
func TestChartCertManager(t *testing.T) {
	docs := renderChart(t, systemNamespace, map[string]any{"webhook": map[string]any{"certManager": map[string]any{"enabled": true}}}, "--api-versions", runtimeAPI)
	checkChartObjects(t, docs, systemNamespace)
	compareWithKustomize(t, docs, "manifests/overlays/cert-manager", true)

	// With an issuer of one's own, the chart creates no Issuer.
	docs = renderChart(t, systemNamespace, map[string]any{"webhook": map[string]any{"certManager": map[string]any{
		"enabled": true, "issuerRef": map[string]any{"kind": "ClusterIssuer", "name": "corp-ca"},
	}}})
	for _, d := range docs {
		if d.kind() == "Issuer" {
			t.Errorf("%s: issuerRef is set; the chart must not create an Issuer", d)
		}
	}
	var cert certificate
	if err := yaml.Unmarshal(findIn(t, docs, "Certificate", webhookSecret).json, &cert); err != nil {
		t.Fatal(err)
	}
	if ref := cert.Spec.IssuerRef; ref.Kind != "ClusterIssuer" || ref.Name != "corp-ca" {
		t.Errorf("Certificate issuerRef %+v, want ClusterIssuer corp-ca", ref)
	}
}

// TestChartNonDefaultValues renders the chart with every value changed and
// checks that each change arrives where it should, and nothing else changes.
func TestChartNonDefaultValues(t *testing.T) {
	ns := nonDefaultNamespace
	values := nonDefaultValues()
	docs := renderChart(t, ns, nil, "--values", valuesFile(t, values), "--api-versions", runtimeAPI)
	got := checkChartObjects(t, docs, ns)

	// namespace.create=false, runtimes.enabled=false, cert-manager, ServiceMonitor.
	for key, want := range map[string]bool{
		"Namespace/" + ns:                                         false,
		"Secret/" + webhookSecret:                                 false,
		"ClusterRole/" + runtimeReaderRole:                        false,
		"ClusterRoleBinding/" + runtimeReaderRole:                 false,
		"ClusterRoleBinding/" + metricsReaderRole:                 true,
		"Role/" + certRotationRole:                                false,
		"ClusterRole/" + certRotationRole:                         false,
		"Issuer/trainyard-selfsigned":                             true,
		"Certificate/" + webhookSecret:                            true,
		serviceMonitorKind + "/" + managerName:                    true,
		"CustomResourceDefinition/trainjobs.trainer.kubeflow.org": true,
	} {
		if got[key] != want {
			t.Errorf("%s rendered: %v, want %v", key, got[key], want)
		}
	}
	for key := range got {
		if strings.HasPrefix(key, trainer.ClusterTrainingRuntimeKind+"/") {
			t.Errorf("runtimes.enabled=false, but %s is rendered", key)
		}
	}

	dep := decodeInto[appsv1.Deployment](t, findIn(t, docs, "Deployment", managerName))
	spec := dep.Spec.Template.Spec
	c := spec.Containers[0]
	if c.Image != "registry.example.com/mirror/trainyard-manager:v9.9.9" || c.ImagePullPolicy != corev1.PullAlways {
		t.Errorf("image %q (%s), want registry.example.com/mirror/trainyard-manager:v9.9.9 (Always)", c.Image, c.ImagePullPolicy)
	}
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 2 {
		t.Errorf("replicas %v, want 2", dep.Spec.Replicas)
	}
	wantArgs := []string{
		"--leader-elect", "--leader-election-namespace=$(POD_NAMESPACE)",
		"--leader-election-lease-duration=4s", "--leader-election-renew-deadline=3s", "--leader-election-retry-period=500ms",
		"--metrics-bind-address=:9090", "--metrics-secure=false", "--health-probe-bind-address=:8081",
		"--memory-limit=$(MEMORY_LIMIT)", "--kueue-mode=jobset", "--cluster-domain=corp.example", "--gang-scheduler-name=volcano", "--cert-management=external",
		"--zap-log-level=debug", "--trainjob-concurrency=10",
	}
	if diff := cmp.Diff(wantArgs, c.Args); diff != "" {
		t.Errorf("manager args (-want +got):\n%s", diff)
	}
	checkManagerFlags(t, c)
	checkMemoryLimitEnv(t, c)
	wantRes := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi")},
	}
	if diff := cmp.Diff(wantRes, c.Resources); diff != "" {
		t.Errorf("resources (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"node-role.kubernetes.io/control-plane": ""}, spec.NodeSelector); diff != "" {
		t.Errorf("nodeSelector (-want +got):\n%s", diff)
	}
	wantTol := []corev1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	if diff := cmp.Diff(wantTol, spec.Tolerations); diff != "" {
		t.Errorf("tolerations (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]corev1.LocalObjectReference{{Name: "mirror-credentials"}}, spec.ImagePullSecrets); diff != "" {
		t.Errorf("imagePullSecrets (-want +got):\n%s", diff)
	}
	if spec.PriorityClassName != "system-cluster-critical" {
		t.Errorf("priorityClassName %q", spec.PriorityClassName)
	}
	if dep.Spec.Template.Annotations["example.com/team"] != "platform" {
		t.Errorf("pod annotations %v lack example.com/team=platform", dep.Spec.Template.Annotations)
	}

	// Apart from those values, the Deployment is the default one: same
	// security contexts, probes, ports, volumes.
	def := decodeInto[appsv1.Deployment](t, findIn(t, renderChart(t, systemNamespace, nil), "Deployment", managerName))
	strip := func(d *appsv1.Deployment) appsv1.DeploymentSpec {
		s := *d.Spec.DeepCopy()
		s.Replicas = nil
		s.Template.Annotations = nil
		ps := &s.Template.Spec
		ps.NodeSelector, ps.Tolerations, ps.ImagePullSecrets, ps.PriorityClassName = nil, nil, nil, ""
		ps.Containers[0].Image, ps.Containers[0].ImagePullPolicy, ps.Containers[0].Args, ps.Containers[0].Resources = "", "", nil, corev1.ResourceRequirements{}
		// metrics.port; checkService below checks the metrics port.
		ps.Containers[0].Ports = slices.DeleteFunc(ps.Containers[0].Ports, func(p corev1.ContainerPort) bool { return p.Name == "metrics" })
		return s
	}
	if diff := cmp.Diff(strip(def), strip(dep)); diff != "" {
		t.Errorf("the Deployment differs from the default one beyond the values (-default +non-default):\n%s", diff)
	}

	// The webhooks call the Service in the chosen namespace, and the CA comes
	// from cert-manager's Certificate for that Service.
	for _, w := range webhooksIn(t, docs) {
		if s := w.clientConfig.Service; s == nil || s.Name != webhookService || s.Namespace != ns {
			t.Errorf("%s: calls %+v, want Service %s/%s", w, s, ns, webhookService)
		}
	}
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		for _, d := range docs {
			if d.kind() != kind {
				continue
			}
			ann, _ := meta(d.obj)["annotations"].(map[string]any)
			if v := str(ann[injectCAFrom]); v != ns+"/"+webhookSecret {
				t.Errorf("%s: %s=%q, want %s/%s", d, injectCAFrom, v, ns, webhookSecret)
			}
		}
	}
	var cert certificate
	if err := yaml.Unmarshal(findIn(t, docs, "Certificate", webhookSecret).json, &cert); err != nil {
		t.Fatal(err)
	}
	if want := []string{webhookService + "." + ns + ".svc", webhookService + "." + ns + ".svc.cluster.local"}; !slices.Equal(cert.Spec.DNSNames, want) {
		t.Errorf("Certificate dnsNames %q, want %q", cert.Spec.DNSNames, want)
	}
	if cert.Spec.SecretName != webhookSecret {
		t.Errorf("Certificate secretName %q, want %q (the Secret the Deployment mounts)", cert.Spec.SecretName, webhookSecret)
	}

	// The ServiceMonitor scrapes the metrics port of the metrics Service, and
	// carries the labels Prometheus selects it by.
	sm := decodeInto[serviceMonitor](t, findIn(t, docs, serviceMonitorKind, managerName))
	if sm.Metadata.Labels["release"] != "prometheus" {
		t.Errorf("ServiceMonitor labels %v lack release=prometheus", sm.Metadata.Labels)
	}
	svc := decodeInto[corev1.Service](t, findIn(t, docs, "Service", metricsService))
	for k, v := range sm.Spec.Selector.MatchLabels {
		if svc.Labels[k] != v {
			t.Errorf("the ServiceMonitor selects %s=%s, which Service %s lacks", k, v, metricsService)
		}
	}
	// metrics.secure=false: plain HTTP, without token or TLS settings.
	want := []serviceMonitorEndpoint{{Port: svc.Spec.Ports[0].Name, Path: "/metrics", Scheme: "http", Interval: "15s", ScrapeTimeout: "10s"}}
	if diff := cmp.Diff(want, sm.Spec.Endpoints); diff != "" {
		t.Errorf("ServiceMonitor endpoints (-want +got):\n%s", diff)
	}
	checkService(t, svc, dep, 9090, 9090)
	checkService(t, decodeInto[corev1.Service](t, findIn(t, docs, "Service", webhookService)), dep, 443, webhookPort)
}

// serviceMonitor holds the fields of a Prometheus Operator ServiceMonitor that
// the chart sets; decoding strictly into it (decodeInto) fails on any other.
type serviceMonitor struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		Selector  metav1.LabelSelector     `json:"selector"`
		Endpoints []serviceMonitorEndpoint `json:"endpoints"`
	} `json:"spec"`
}

type serviceMonitorEndpoint struct {
	Port            string     `json:"port"`
	Path            string     `json:"path"`
	Scheme          string     `json:"scheme"`
	BearerTokenFile string     `json:"bearerTokenFile,omitempty"`
	TLSConfig       *tlsConfig `json:"tlsConfig,omitempty"`
	Interval        string     `json:"interval,omitempty"`
	ScrapeTimeout   string     `json:"scrapeTimeout,omitempty"`
}

type tlsConfig struct {
	InsecureSkipVerify bool   `json:"insecureSkipVerify,omitempty"`
	ServerName         string `json:"serverName,omitempty"`
	CA                 *struct {
		Secret corev1.SecretKeySelector `json:"secret"`
	} `json:"ca,omitempty"`
}

// checkManagerFlags checks that the manager has a flag for every argument.
func checkManagerFlags(t *testing.T, c corev1.Container) {
	t.Helper()
	if testing.Short() {
		return
	}
	flags, err := managerFlags()
	if err != nil {
		t.Errorf("reading the manager's flags: %v", err)
		return
	}
	for name := range containerArgs(c) {
		if _, ok := flags[name]; !ok {
			t.Errorf("container %s: trainyard-manager has no flag -%s", c.Name, name)
		}
	}
}

// TestChartValueVariants covers the values that change one thing each.
func TestChartValueVariants(t *testing.T) {
	t.Run("image digest", func(t *testing.T) {
		const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
		docs := renderChart(t, systemNamespace, map[string]any{"image": map[string]any{"digest": digest, "tag": "ignored"}})
		dep := decodeInto[appsv1.Deployment](t, findIn(t, docs, "Deployment", managerName))
		if got, want := dep.Spec.Template.Spec.Containers[0].Image, managerImage+"@"+digest; got != want {
			t.Errorf("image %q, want %q", got, want)
		}
	})
	t.Run("release namespace", func(t *testing.T) {
		docs := renderChart(t, "ml", map[string]any{"namespace": map[string]any{"name": ""}})
		checkChartObjects(t, docs, "ml")
		findIn(t, docs, "Namespace", "ml")
	})
	t.Run("PyTorchJob API off", func(t *testing.T) {
		// Next to Kubeflow's training operator: no PyTorchJob CRD, no
		// PyTorchJob webhooks, and a manager that leaves PyTorchJobs alone.
		docs := renderChart(t, systemNamespace, map[string]any{"pytorchJob": map[string]any{"enabled": false}})
		for _, d := range docs {
			if d.kind() == "CustomResourceDefinition" && d.name() == "pytorchjobs.kubeflow.org" {
				t.Errorf("pytorchJob.enabled=false, but %s is rendered", d)
			}
			if d.kind() == "ValidatingWebhookConfiguration" || d.kind() == "MutatingWebhookConfiguration" {
				if strings.Contains(string(d.json), "pytorchjobs") {
					t.Errorf("pytorchJob.enabled=false, but %s has a PyTorchJob webhook", d)
				}
			}
		}
		c := decodeInto[appsv1.Deployment](t, findIn(t, docs, "Deployment", managerName)).Spec.Template.Spec.Containers[0]
		if !slices.Contains(c.Args, "--enable-pytorchjob=false") {
			t.Errorf("pytorchJob.enabled=false, but the manager runs with %q", c.Args)
		}
		// On by default: the CRD and both webhooks are there.
		on := renderChart(t, systemNamespace, nil)
		findIn(t, on, "CustomResourceDefinition", "pytorchjobs.kubeflow.org")
		hooks := 0
		for _, d := range on {
			if (d.kind() == "ValidatingWebhookConfiguration" || d.kind() == "MutatingWebhookConfiguration") && strings.Contains(string(d.json), "pytorchjobs") {
				hooks++
			}
		}
		if hooks != 2 {
			t.Errorf("%d webhook configurations with a PyTorchJob webhook by default, want 2", hooks)
		}
	})
	t.Run("status server off", func(t *testing.T) {
		// statusServer.enabled=false: the manager runs without it, and neither
		// the container nor the webhook Service has its port.
		for _, tc := range []struct {
			values  map[string]any
			enabled bool
		}{{nil, true}, {map[string]any{"statusServer": map[string]any{"enabled": false}}, false}} {
			docs := renderChart(t, systemNamespace, tc.values)
			c := decodeInto[appsv1.Deployment](t, findIn(t, docs, "Deployment", managerName)).Spec.Template.Spec.Containers[0]
			if got := !slices.Contains(c.Args, "--enable-status-server=false"); got != tc.enabled {
				t.Errorf("statusServer.enabled=%v: manager args %q", tc.enabled, c.Args)
			}
			containerPort := slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "status-server" && p.ContainerPort == 10443 })
			svc := decodeInto[corev1.Service](t, findIn(t, docs, "Service", "trainyard-webhook"))
			servicePort := slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == "status-server" && p.Port == 10443 })
			if containerPort != tc.enabled || servicePort != tc.enabled {
				t.Errorf("statusServer.enabled=%v: container port %v, Service port %v", tc.enabled, containerPort, servicePort)
			}
		}
	})
	t.Run("leader election off", func(t *testing.T) {
		docs := renderChart(t, systemNamespace, map[string]any{"leaderElection": map[string]any{"enabled": false}})
		c := decodeInto[appsv1.Deployment](t, findIn(t, docs, "Deployment", managerName)).Spec.Template.Spec.Containers[0]
		for _, a := range c.Args {
			if strings.HasPrefix(a, "--leader-elect") {
				t.Errorf("leaderElection.enabled=false, but the manager runs with %s", a)
			}
		}
	})
	t.Run("secure metrics with a ServiceMonitor", func(t *testing.T) {
		// The defaults: HTTPS, Prometheus' own token, the self-signed
		// certificate accepted.
		docs := renderChart(t, systemNamespace, map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true}}})
		sm := decodeInto[serviceMonitor](t, findIn(t, docs, serviceMonitorKind, managerName))
		want := []serviceMonitorEndpoint{{
			Port: "metrics", Path: "/metrics", Scheme: "https",
			BearerTokenFile: "/var/run/secrets/kubernetes.io/serviceaccount/token",
			TLSConfig:       &tlsConfig{InsecureSkipVerify: true},
			Interval:        "30s", ScrapeTimeout: "10s",
		}}
		if diff := cmp.Diff(want, sm.Spec.Endpoints); diff != "" {
			t.Errorf("ServiceMonitor endpoints (-want +got):\n%s", diff)
		}
		dep := decodeInto[appsv1.Deployment](t, findIn(t, docs, "Deployment", managerName))
		checkService(t, decodeInto[corev1.Service](t, findIn(t, docs, "Service", metricsService)), dep, 8443, 8443)
	})
	t.Run("metrics certificate from a Secret", func(t *testing.T) {
		// The manager serves the Secret's certificate, and Prometheus verifies
		// it with the Secret's CA for the Service's name.
		docs := renderChart(t, systemNamespace, map[string]any{"metrics": map[string]any{
			"certSecret": "metrics-cert", "serviceMonitor": map[string]any{"enabled": true},
		}})
		const dir = "/tmp/k8s-metrics-server/metrics-certs"
		dep := decodeInto[appsv1.Deployment](t, findIn(t, docs, "Deployment", managerName))
		c := dep.Spec.Template.Spec.Containers[0]
		if !slices.Contains(c.Args, "--metrics-cert-dir="+dir) {
			t.Errorf("args %q lack --metrics-cert-dir=%s", c.Args, dir)
		}
		checkManagerFlags(t, c)
		i := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == dir })
		if i < 0 || c.VolumeMounts[i].SubPath != "" || !c.VolumeMounts[i].ReadOnly {
			t.Fatalf("container %s: no whole, read-only volume at %s: %+v", c.Name, dir, c.VolumeMounts)
		}
		vols := dep.Spec.Template.Spec.Volumes
		j := slices.IndexFunc(vols, func(v corev1.Volume) bool { return v.Name == c.VolumeMounts[i].Name })
		if j < 0 || vols[j].Secret == nil || vols[j].Secret.SecretName != "metrics-cert" {
			t.Errorf("the volume at %s is not the Secret metrics-cert: %+v", dir, vols)
		}
		sm := decodeInto[serviceMonitor](t, findIn(t, docs, serviceMonitorKind, managerName))
		want := &tlsConfig{ServerName: metricsService + "." + systemNamespace + ".svc"}
		want.CA = &struct {
			Secret corev1.SecretKeySelector `json:"secret"`
		}{corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "metrics-cert"}, Key: "ca.crt"}}
		if len(sm.Spec.Endpoints) != 1 {
			t.Fatalf("ServiceMonitor endpoints %+v, want one", sm.Spec.Endpoints)
		}
		if diff := cmp.Diff(want, sm.Spec.Endpoints[0].TLSConfig); diff != "" {
			t.Errorf("ServiceMonitor tlsConfig (-want +got):\n%s", diff)
		}
	})
	for name, tc := range map[string]struct {
		values map[string]any
		errSub string
	}{
		"a metrics certificate for plain HTTP":     {map[string]any{"metrics": map[string]any{"secure": false, "certSecret": "metrics-cert"}}, "metrics.certSecret needs metrics.secure"},
		"metrics on the health port":               {map[string]any{"metrics": map[string]any{"port": 8081}}, "metrics.port must differ"},
		"a metrics reader without a namespace":     {map[string]any{"metrics": map[string]any{"readerServiceAccounts": []any{map[string]any{"name": "prometheus"}}}}, "namespace"},
		"several replicas without leader election": {map[string]any{"replicaCount": 3, "leaderElection": map[string]any{"enabled": false}}, "needs leaderElection.enabled"},
		"unknown kueue mode":                       {map[string]any{"kueue": map[string]any{"mode": "workload"}}, "kueue/mode"},
		"a cluster domain that is no DNS name":     {map[string]any{"clusterDomain": "Cluster_Local."}, "clusterDomain"},
		"an empty cluster domain":                  {map[string]any{"clusterDomain": ""}, "clusterDomain"},
		"a lease duration that is no Go duration":  {map[string]any{"leaderElection": map[string]any{"leaseDuration": "4 seconds"}}, "leaseDuration"},
		"an unknown PyTorchJob gang scheduler":     {map[string]any{"pytorchJob": map[string]any{"gangSchedulerName": "kube-batch"}}, "gangSchedulerName"},
		"misspelt value":                           {map[string]any{"replicacount": 2}, "replicacount"},
		"issuerRef without a name":                 {map[string]any{"webhook": map[string]any{"certManager": map[string]any{"enabled": true, "issuerRef": map[string]any{"kind": "ClusterIssuer"}}}}, "issuerRef needs a name"},
	} {
		t.Run("rejects "+name, func(t *testing.T) {
			_, err := runHelm(t, "template", chartRelease, chartDir, "--namespace", systemNamespace, "--values", valuesFile(t, tc.values))
			if err == nil || !strings.Contains(err.Error(), tc.errSub) {
				t.Errorf("helm template: error %v, want one that mentions %q", err, tc.errSub)
			}
		})
	}
}
