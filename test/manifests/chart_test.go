package manifests

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
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
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/version"
	"github.com/trainyard/trainyard/test/prereq"
)

// The Helm chart (manifests/charts/trainyard). The tests render it with
// bin/helm, built from test/tools/helm by `make helm`, and skip without it.
const (
	chartDir     = "manifests/charts/trainyard"
	chartRelease = "trainyard"
	// The label that exempts the chart's runtimes from the runtime webhooks.
	webhookValidationLabel = "trainer.kubeflow.org/webhook-validation"
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
	_, err = os.Stat(p)
	prereq.Require(t, !errors.Is(err, fs.ErrNotExist), "bin/helm not found: run `make chart-test` (or `make helm`, which builds it from test/tools/helm) to test the Helm chart")
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

// renderChart runs `helm template --include-crds` (what GitOps tools apply:
// the CRDs of the chart's crds/ directory first, then the templates) in the
// given release namespace with the given values and extra flags, and returns
// the rendered objects.
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
	args := []string{"template", chartRelease, chartDir, "--namespace", namespace, "--include-crds"}
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
// (TestChartValueVariants covers it), and runtimes.catalog, which matters only
// with the runtimes.enabled that these turn off (TestChartRuntimeValues). The
// manager goes to namespace nonDefaultNamespace, which the chart creates: render
// them in release namespace nonDefaultReleaseNamespace.
func nonDefaultValues() map[string]any {
	return map[string]any{
		"namespace":                 map[string]any{"create": true, "name": nonDefaultNamespace},
		"image":                     map[string]any{"repository": "registry.example.com/mirror/trainyard-manager", "tag": "v9.9.9", "pullPolicy": "Always"},
		"imagePullSecrets":          []any{map[string]any{"name": "mirror-credentials"}},
		"replicaCount":              2,
		"leaderElection":            map[string]any{"enabled": true, "leaseDuration": "4s", "renewDeadline": "3s", "retryPeriod": "500ms"},
		"kueue":                     map[string]any{"mode": "jobset"},
		"clusterDomain":             "corp.example",
		"pytorchJob":                map[string]any{"gangSchedulerName": "volcano", "concurrency": 5},
		"webhook":                   map[string]any{"failurePolicy": "Ignore", "timeoutSeconds": 5, "certManager": map[string]any{"enabled": true}},
		"podDisruptionBudget":       map[string]any{"maxUnavailable": "50%"},
		"topologySpreadConstraints": []any{map[string]any{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule"}},
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
		"statusServer": map[string]any{"networkPolicy": map[string]any{"enabled": false}, "limits": map[string]any{
			"clientQPS": 2.5, "clientBurst": 7, "tokenQPS": 3, "tokenBurst": 9, "tokenReviewQPS": 50, "tokenReviewBurst": 1000000,
			"tokenCacheSize": 200000, "tokenCacheTTL": "2m", "tokenCacheNegativeTTL": "5s",
		}},
	}
}

const (
	nonDefaultNamespace        = "ml-platform"
	nonDefaultReleaseNamespace = "ml-releases"
)

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
		{"manifests/base/crds", chartDir + "/crds", baseCRDFiles(t)},
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
		if sdkCopy(d) {
			key = d.kind() + "/" + version.SDKNamespace + "/" + d.name()
		}
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
		case sdkCopy(d):
		case namespaced && d.namespace() != ns:
			t.Errorf("%s: namespace %q, want %q", d, d.namespace(), ns)
		case !namespaced && d.namespace() != "":
			t.Errorf("%s: cluster-scoped object has namespace %q", d, d.namespace())
		}
		if d.kind() == "CustomResourceDefinition" {
			// From crds/, verbatim: Helm does not template them
			// (compareWithKustomize checks them against manifests/base).
			continue
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
// kustomize labels must be among the chart's), explicit --kueue-mode and --cluster-domain arguments with the manager's defaults, and the
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
		if a, ok := m["annotations"].(map[string]any); ok && isChart {
			// The chart keeps the SDK's namespace on uninstall.
			delete(a, "helm.sh/resource-policy")
			if len(a) == 0 {
				delete(m, "annotations")
			}
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
// runtimes when wantRuntimes. The kustomizations create their namespace; the
// chart only with namespace.create, so without wantNamespace the
// kustomization's Namespace is left out of the comparison.
func compareWithKustomize(t *testing.T, chart []doc, kustomizeDir string, wantRuntimes, wantNamespace bool) {
	t.Helper()
	base := render(t, kustomizeDir)
	if !wantNamespace {
		base = slices.DeleteFunc(slices.Clone(base), func(d doc) bool { return d.kind() == "Namespace" && !sdkCopy(d) })
	}
	key := func(d doc) string { return d.kind() + "/" + d.namespace() + "/" + d.name() }
	want := map[string]bool{}
	for _, d := range base {
		want[key(d)] = true
	}
	if wantRuntimes {
		for name := range catalog {
			want[trainer.ClusterTrainingRuntimeKind+"//"+name] = true
		}
	}
	got := map[string]bool{}
	for _, d := range chart {
		got[key(d)] = true
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("objects of the chart differ from those of %s (-kustomize +chart):\n%s", kustomizeDir, diff)
	}
	for _, b := range base {
		i := slices.IndexFunc(chart, func(c doc) bool { return key(c) == key(b) })
		if i < 0 {
			continue // reported above
		}
		if diff := chartBaseDiff(t, chart[i], b); diff != "" {
			t.Errorf("%s differs from %s in %s (-kustomize +chart):\n%s", chart[i], b.kind()+"/"+b.name(), kustomizeDir, diff)
		}
	}
}

// TestChartDefaults renders the chart with its default values in release
// namespace trainyard-system, as `helm install -n trainyard-system` does (helm
// template knows nothing of the cluster), and checks that it is the kustomize
// base (manifests/overlays/standalone), object by object, but the Namespace,
// which the chart leaves to Helm, plus the runtime catalog; that with
// namespace.create it is the base with its Namespace; that the runtimes are
// those of runtimes/, exempt from the runtime webhooks; and that the chart's
// RBAC rules are the base's.
func TestChartDefaults(t *testing.T) {
	docs := renderChart(t, systemNamespace, nil)
	checkChartObjects(t, docs, systemNamespace)
	compareWithKustomize(t, docs, "manifests/overlays/standalone", true, false)
	t.Run("namespace.create", func(t *testing.T) {
		// The release elsewhere, the chart creating trainyard-system: the
		// Namespace is the base's too.
		docs := renderChart(t, "default", map[string]any{"namespace": map[string]any{"create": true, "name": systemNamespace}})
		checkChartObjects(t, docs, systemNamespace)
		compareWithKustomize(t, docs, "manifests/overlays/standalone", true, true)
	})

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
	checkAvailability(t, dep, decodeInto[policyv1.PodDisruptionBudget](t, findIn(t, docs, "PodDisruptionBudget", managerName)))
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
	// The reader of the public ConfigMap twice: in the manager's namespace
	// and beside the copy in the Kubeflow SDK's default namespace.
	userRoles := []string{"ClusterRole/" + viewRole, "ClusterRole/" + editRole, "ClusterRole/" + metricsReaderRole,
		"Role/" + publicConfigMapReaderRole, "Role/" + publicConfigMapReaderRole}
	for _, tc := range []struct {
		name, ns  string
		values    map[string]any
		wantRoles []string
		// Subjects of the bindings of the user-facing roles; the others bind
		// the manager.
		wantSubjects map[string][]rbacv1.Subject
		// The release namespace, if not ns.
		release string
	}{
		{"default values", systemNamespace, nil, append([]string{
			"ClusterRole/" + managerName, "Role/" + leaderElectionRole, "Role/" + certRotationRole, "ClusterRole/" + certRotationRole,
			"ClusterRole/" + runtimeReaderRole,
		}, userRoles...), map[string][]rbacv1.Subject{runtimeReaderRole: allAuthenticated, publicConfigMapReaderRole: allAuthenticated}, ""},
		// cert-manager: no rotation RBAC; the runtimes only for those the
		// cluster admin lets read them; a metrics reader.
		{"non-default values", nonDefaultNamespace, nonDefaultValues(), append([]string{"ClusterRole/" + managerName, "Role/" + leaderElectionRole}, userRoles...),
			map[string][]rbacv1.Subject{metricsReaderRole: {{Kind: "ServiceAccount", Name: "prometheus-k8s", Namespace: "monitoring"}},
				publicConfigMapReaderRole: allAuthenticated}, nonDefaultReleaseNamespace},
		// No leader election: no Lease permissions.
		{"leader election off", systemNamespace, map[string]any{"replicaCount": 1, "leaderElection": map[string]any{"enabled": false}}, append([]string{
			"ClusterRole/" + managerName, "Role/" + certRotationRole, "ClusterRole/" + certRotationRole, "ClusterRole/" + runtimeReaderRole,
		}, userRoles...), map[string][]rbacv1.Subject{runtimeReaderRole: allAuthenticated, publicConfigMapReaderRole: allAuthenticated}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := tc.release
			if release == "" {
				release = tc.ns
			}
			docs := renderChart(t, release, tc.values)
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
					if d.kind() == "Role" && d.namespace() != tc.ns && !sdkCopy(d) {
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

// TestChartCRDsAndRuntimes checks how the chart ships the CRDs and the
// runtimes so that the first `helm install` creates both, and `helm template`
// renders both: the CRDs are manifests/base's, verbatim, in the chart's crds/
// directory (which Helm creates before it resolves the templates' kinds, and
// which `helm template` prints with --include-crds and `helm show crds` for
// upgrades), and the runtimes are ordinary templates rendered without any
// knowledge of the cluster (no --api-versions).
func TestChartCRDsAndRuntimes(t *testing.T) {
	kinds := func(docs []doc) map[string]int {
		n := map[string]int{}
		for _, d := range docs {
			n[d.kind()]++
		}
		return n
	}
	out, err := runHelm(t, "template", chartRelease, chartDir, "--namespace", systemNamespace)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := decodeDocs("helm template", bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if got := kinds(docs); got[trainer.ClusterTrainingRuntimeKind] != len(catalog) || got["CustomResourceDefinition"] != 0 {
		t.Errorf("helm template: %d runtimes and %d CRDs, want %d and 0 (the CRDs only with --include-crds)", got[trainer.ClusterTrainingRuntimeKind], got["CustomResourceDefinition"], len(catalog))
	}

	// The CRDs of --include-crds and of `helm show crds` are those of
	// manifests/base, unchanged, and come first.
	baseCRDs := map[string]doc{}
	for _, d := range base(t).docs {
		if d.kind() == "CustomResourceDefinition" {
			baseCRDs[d.name()] = d
		}
	}
	checkCRDs := func(what string, docs []doc) {
		t.Helper()
		n := 0
		for i, d := range docs {
			if d.kind() != "CustomResourceDefinition" {
				continue
			}
			n++
			if i >= len(baseCRDs) {
				t.Errorf("%s: %s comes after other objects", what, d)
			}
			b, ok := baseCRDs[d.name()]
			if !ok {
				t.Errorf("%s: %s is not in manifests/base", what, d)
				continue
			}
			if diff := cmp.Diff(b.obj, d.obj); diff != "" {
				t.Errorf("%s: %s differs from manifests/base (-base +chart):\n%s", what, d, diff)
			}
		}
		if n != len(baseCRDs) {
			t.Errorf("%s: %d CRDs, want the %d of manifests/base", what, n, len(baseCRDs))
		}
	}
	checkCRDs("helm template --include-crds", renderChart(t, systemNamespace, nil))
	out, err = runHelm(t, "show", "crds", chartDir)
	if err != nil {
		t.Fatal(err)
	}
	shown, err := decodeDocs("helm show crds", bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	checkCRDs("helm show crds", shown)

	// No template is a CRD, and none asks the cluster whether it serves the
	// runtime API: the runtimes render the same everywhere.
	templates, err := filepath.Glob(filepath.Join(repoRoot, chartDir, "templates", "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range templates {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{"Capabilities.APIVersions", "files/crds", "CustomResourceDefinition"} {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("%s mentions %s: the CRDs belong in crds/, and the runtimes must not depend on the cluster", p, s)
			}
		}
	}
	// runtimes.enabled=false: none.
	if n := kinds(renderChart(t, systemNamespace, map[string]any{"runtimes": map[string]any{"enabled": false}}))[trainer.ClusterTrainingRuntimeKind]; n != 0 {
		t.Errorf("runtimes.enabled=false: %d runtimes", n)
	}
}

// TestChartCertManager checks webhook.certManager.enabled against the
// cert-manager overlay: the same objects, each the same way (the Issuer and
// Certificate included).
func TestChartCertManager(t *testing.T) {
	docs := renderChart(t, "default", map[string]any{
		"namespace": map[string]any{"create": true, "name": systemNamespace},
		"webhook":   map[string]any{"certManager": map[string]any{"enabled": true}},
	})
	checkChartObjects(t, docs, systemNamespace)
	compareWithKustomize(t, docs, "manifests/overlays/cert-manager", true, true)
	checkWebhookCAChain(t, docs, systemNamespace, "cluster.local")

	// With an issuer of one's own, the chart creates no Issuer and no CA, and
	// the CA injector takes the CA from the serving certificate's Secret
	// (ca.crt, which that issuer sets).
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
	for _, d := range docs {
		switch d.kind() {
		case "Certificate":
			if d.name() != webhookSecret {
				t.Errorf("%s: issuerRef is set; the chart must create only the serving certificate", d)
			}
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			ann, _ := meta(d.obj)["annotations"].(map[string]any)
			if v, want := str(ann[injectCAFrom]), systemNamespace+"/"+webhookSecret; v != want {
				t.Errorf("%s: %s=%q, want %q", d, injectCAFrom, v, want)
			}
		}
	}
}

// TestChartNonDefaultValues renders the chart with every value changed and
// checks that each change arrives where it should, and nothing else changes.
func TestChartNonDefaultValues(t *testing.T) {
	ns := nonDefaultNamespace
	values := nonDefaultValues()
	docs := renderChart(t, nonDefaultReleaseNamespace, values)
	got := checkChartObjects(t, docs, ns)

	// namespace.create, runtimes.enabled=false, cert-manager, ServiceMonitor.
	for key, want := range map[string]bool{
		"Namespace/" + ns:                                         true,
		"Secret/" + webhookSecret:                                 false,
		"ClusterRole/" + runtimeReaderRole:                        false,
		"ClusterRoleBinding/" + runtimeReaderRole:                 false,
		"ClusterRoleBinding/" + metricsReaderRole:                 true,
		"Role/" + certRotationRole:                                false,
		"ClusterRole/" + certRotationRole:                         false,
		"Issuer/trainyard-selfsigned":                             true,
		"Issuer/trainyard-ca":                                     true,
		"Certificate/trainyard-webhook-ca":                        true,
		"Certificate/" + webhookSecret:                            true,
		"PodDisruptionBudget/" + managerName:                      true,
		"NetworkPolicy/" + managerName:                            false,
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
		"--memory-limit=$(MEMORY_LIMIT)", "--kueue-mode=jobset", "--cluster-domain=corp.example", "--gang-scheduler-name=volcano", "--pytorchjob-concurrency=5", "--cert-management=external",
		"--status-server-client-qps=2.5", "--status-server-token-cache-negative-ttl=5s", "--status-server-token-cache-ttl=2m",
		"--status-server-token-qps=3", "--status-server-token-review-qps=50",
		"--status-server-client-burst=7", "--status-server-token-burst=9", "--status-server-token-cache-size=200000", "--status-server-token-review-burst=1000000",
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
		ps.NodeSelector, ps.Tolerations, ps.ImagePullSecrets, ps.PriorityClassName, ps.TopologySpreadConstraints = nil, nil, nil, "", nil
		ps.Containers[0].Image, ps.Containers[0].ImagePullPolicy, ps.Containers[0].Args, ps.Containers[0].Resources = "", "", nil, corev1.ResourceRequirements{}
		// metrics.port; checkService below checks the metrics port.
		ps.Containers[0].Ports = slices.DeleteFunc(ps.Containers[0].Ports, func(p corev1.ContainerPort) bool { return p.Name == "metrics" })
		return s
	}
	if diff := cmp.Diff(strip(def), strip(dep)); diff != "" {
		t.Errorf("the Deployment differs from the default one beyond the values (-default +non-default):\n%s", diff)
	}

	// The pods spread across zones, as topologySpreadConstraints say, and
	// at most half of them may be evicted at a time.
	wantSpread := []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: dep.Spec.Selector.MatchLabels}}}
	if diff := cmp.Diff(wantSpread, spec.TopologySpreadConstraints); diff != "" {
		t.Errorf("topologySpreadConstraints (-want +got):\n%s", diff)
	}
	pdb := decodeInto[policyv1.PodDisruptionBudget](t, findIn(t, docs, "PodDisruptionBudget", managerName))
	if mu := pdb.Spec.MaxUnavailable; mu == nil || *mu != intstr.FromString("50%") || pdb.Spec.MinAvailable != nil {
		t.Errorf("PodDisruptionBudget maxUnavailable %v, minAvailable %v; want 50%% and unset", deref(mu), deref(pdb.Spec.MinAvailable))
	}
	if diff := cmp.Diff(dep.Spec.Selector, pdb.Spec.Selector); diff != "" {
		t.Errorf("PodDisruptionBudget selector (-Deployment's +budget's):\n%s", diff)
	}

	// The webhooks call the Service in the chosen namespace, with the failure
	// policy and timeout of the values, and the CA comes from cert-manager's
	// CA for that Service, in the cluster's domain.
	for _, w := range webhooksIn(t, docs) {
		if s := w.clientConfig.Service; s == nil || s.Name != webhookService || s.Namespace != ns {
			t.Errorf("%s: calls %+v, want Service %s/%s", w, s, ns, webhookService)
		}
		if w.failurePolicy == nil || *w.failurePolicy != admissionregistrationv1.Ignore || w.timeoutSeconds == nil || *w.timeoutSeconds != 5 {
			t.Errorf("%s: failurePolicy %v, timeoutSeconds %v; want Ignore and 5", w, deref(w.failurePolicy), deref(w.timeoutSeconds))
		}
	}
	checkWebhookCAChain(t, docs, ns, "corp.example")

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
		// By default everything goes to the release namespace (helm install
		// -n ml), which the chart does not create, so that `helm uninstall`
		// leaves it; the webhooks call the Service there.
		docs := renderChart(t, "ml", nil)
		checkChartObjects(t, docs, "ml")
		for _, d := range docs {
			if d.kind() == "Namespace" && !sdkCopy(d) {
				t.Errorf("%s rendered by default: the chart must not own the release namespace", d)
			}
		}
		for _, w := range webhooksIn(t, docs) {
			if s := w.clientConfig.Service; s == nil || s.Namespace != "ml" {
				t.Errorf("%s: calls %+v, want a Service in ml", w, s)
			}
		}
		// namespace.name: another namespace, which the chart creates only
		// with namespace.create.
		docs = renderChart(t, "ml", map[string]any{"namespace": map[string]any{"name": "ml-platform"}})
		checkChartObjects(t, docs, "ml-platform")
		if slices.ContainsFunc(docs, func(d doc) bool { return d.kind() == "Namespace" && !sdkCopy(d) }) {
			t.Errorf("namespace.name without namespace.create renders a Namespace")
		}
		docs = renderChart(t, "ml", map[string]any{"namespace": map[string]any{"name": "ml-platform", "create": true}})
		checkChartObjects(t, docs, "ml-platform")
		ns := decodeInto[corev1.Namespace](t, findIn(t, docs, "Namespace", "ml-platform"))
		if ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
			t.Errorf("Namespace labels %v, want pod-security.kubernetes.io/enforce=restricted", ns.Labels)
		}
	})
	t.Run("PyTorchJob API off", func(t *testing.T) {
		// Next to Kubeflow's training operator: no PyTorchJob webhooks, and a
		// manager that leaves PyTorchJobs alone. The CRD is in crds/, which
		// values cannot change: Helm creates it only where it is missing, and
		// leaves the operator's alone (docs/install.md).
		// Its settings are then not passed: the manager checks none of them.
		docs := renderChart(t, systemNamespace, map[string]any{"pytorchJob": map[string]any{"enabled": false, "gangSchedulerName": "volcano", "concurrency": 5}})
		for _, d := range docs {
			if d.kind() == "ValidatingWebhookConfiguration" || d.kind() == "MutatingWebhookConfiguration" {
				if strings.Contains(string(d.json), "pytorchjobs") {
					t.Errorf("pytorchJob.enabled=false, but %s has a PyTorchJob webhook", d)
				}
			}
		}
		c := decodeInto[appsv1.Deployment](t, findIn(t, docs, "Deployment", managerName)).Spec.Template.Spec.Containers[0]
		if !slices.Contains(c.Args, "--enable-pytorchjob=false") || slices.ContainsFunc(c.Args, func(a string) bool {
			return strings.HasPrefix(a, "--pytorchjob-concurrency") || strings.HasPrefix(a, "--gang-scheduler-name")
		}) {
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
		// One replica: several need leader election (rejected below).
		docs := renderChart(t, systemNamespace, map[string]any{"replicaCount": 1, "leaderElection": map[string]any{"enabled": false}})
		c := decodeInto[appsv1.Deployment](t, findIn(t, docs, "Deployment", managerName)).Spec.Template.Spec.Containers[0]
		for _, a := range c.Args {
			if strings.HasPrefix(a, "--leader-elect") {
				t.Errorf("leaderElection.enabled=false, but the manager runs with %s", a)
			}
		}
	})
	t.Run("one replica", func(t *testing.T) {
		// No PodDisruptionBudget: with one replica it would protect nothing
		// (maxUnavailable 1) or block every drain. podDisruptionBudget.enabled
		// false drops it with two.
		for _, values := range []map[string]any{
			{"replicaCount": 1},
			{"podDisruptionBudget": map[string]any{"enabled": false}},
		} {
			docs := renderChart(t, systemNamespace, values)
			if slices.ContainsFunc(docs, func(d doc) bool { return d.kind() == "PodDisruptionBudget" }) {
				t.Errorf("%v: a PodDisruptionBudget is rendered", values)
			}
		}
	})
	t.Run("values of a release from before the availability values", func(t *testing.T) {
		// `helm upgrade --reuse-values` renders with the values of the chart
		// the release was installed with, which lack podDisruptionBudget,
		// topologySpreadConstraints and the webhooks' failurePolicy and
		// timeoutSeconds (null removes a default): their defaults hold.
		docs := renderChart(t, systemNamespace, map[string]any{
			"podDisruptionBudget": nil, "topologySpreadConstraints": nil,
			"webhook": map[string]any{"failurePolicy": nil, "timeoutSeconds": nil},
		})
		checkWebhookPolicies(t, webhooksIn(t, docs))
		pdb := decodeInto[policyv1.PodDisruptionBudget](t, findIn(t, docs, "PodDisruptionBudget", managerName))
		if mu := pdb.Spec.MaxUnavailable; mu == nil || *mu != intstr.FromInt32(1) {
			t.Errorf("PodDisruptionBudget maxUnavailable %v, want 1", deref(mu))
		}
	})
	t.Run("webhook failure policy and timeout", func(t *testing.T) {
		docs := renderChart(t, systemNamespace, map[string]any{"webhook": map[string]any{"failurePolicy": "Ignore", "timeoutSeconds": 3}})
		hooks := webhooksIn(t, docs)
		if len(hooks) < 6 {
			t.Fatalf("%d webhooks, want every one of the configurations", len(hooks))
		}
		for _, w := range hooks {
			if w.failurePolicy == nil || *w.failurePolicy != admissionregistrationv1.Ignore {
				t.Errorf("%s: failurePolicy %v, want Ignore", w, deref(w.failurePolicy))
			}
			if w.timeoutSeconds == nil || *w.timeoutSeconds != 3 {
				t.Errorf("%s: timeoutSeconds %v, want 3", w, deref(w.timeoutSeconds))
			}
		}
	})
	t.Run("topology spread", func(t *testing.T) {
		// An entry without a labelSelector counts the manager's pods; one
		// with a selector keeps it; [] leaves the pods to the scheduler.
		custom := map[string]any{"topologySpreadConstraints": []any{
			map[string]any{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule"},
			map[string]any{"maxSkew": 2, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway",
				"labelSelector": map[string]any{"matchLabels": map[string]any{"team": "ml"}}},
		}}
		dep := decodeInto[appsv1.Deployment](t, findIn(t, renderChart(t, systemNamespace, custom), "Deployment", managerName))
		want := []corev1.TopologySpreadConstraint{
			{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.DoNotSchedule,
				LabelSelector: &metav1.LabelSelector{MatchLabels: dep.Spec.Selector.MatchLabels}},
			{MaxSkew: 2, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.ScheduleAnyway,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "ml"}}},
		}
		if diff := cmp.Diff(want, dep.Spec.Template.Spec.TopologySpreadConstraints); diff != "" {
			t.Errorf("topologySpreadConstraints (-want +got):\n%s", diff)
		}
		dep = decodeInto[appsv1.Deployment](t, findIn(t, renderChart(t, systemNamespace, map[string]any{"topologySpreadConstraints": []any{}}), "Deployment", managerName))
		if c := dep.Spec.Template.Spec.TopologySpreadConstraints; c != nil {
			t.Errorf("topologySpreadConstraints=[]: %+v", c)
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
		"a metrics certificate for plain HTTP":       {map[string]any{"metrics": map[string]any{"secure": false, "certSecret": "metrics-cert"}}, "metrics.certSecret needs metrics.secure"},
		"metrics on the health port":                 {map[string]any{"metrics": map[string]any{"port": 8081}}, "metrics.port must differ"},
		"a metrics reader without a namespace":       {map[string]any{"metrics": map[string]any{"readerServiceAccounts": []any{map[string]any{"name": "prometheus"}}}}, "namespace"},
		"several replicas without leader election":   {map[string]any{"replicaCount": 3, "leaderElection": map[string]any{"enabled": false}}, "needs leaderElection.enabled"},
		"unknown kueue mode":                         {map[string]any{"kueue": map[string]any{"mode": "workload"}}, "kueue/mode"},
		"a cluster domain that is no DNS name":       {map[string]any{"clusterDomain": "Cluster_Local."}, "clusterDomain"},
		"an empty cluster domain":                    {map[string]any{"clusterDomain": ""}, "clusterDomain"},
		"a lease duration that is no Go duration":    {map[string]any{"leaderElection": map[string]any{"leaseDuration": "4 seconds"}}, "leaseDuration"},
		"an unknown PyTorchJob gang scheduler":       {map[string]any{"pytorchJob": map[string]any{"gangSchedulerName": "kube-batch"}}, "gangSchedulerName"},
		"a negative PyTorchJob concurrency":          {map[string]any{"pytorchJob": map[string]any{"concurrency": -1}}, "concurrency"},
		"a PyTorchJob concurrency that is no number": {map[string]any{"pytorchJob": map[string]any{"concurrency": "many"}}, "concurrency"},
		"misspelt value":                             {map[string]any{"replicacount": 2}, "replicacount"},
		"an unknown webhook failure policy":          {map[string]any{"webhook": map[string]any{"failurePolicy": "fail"}}, "failurePolicy"},
		"a webhook timeout over 30 seconds":          {map[string]any{"webhook": map[string]any{"timeoutSeconds": 31}}, "timeoutSeconds"},
		"a webhook timeout of 0":                     {map[string]any{"webhook": map[string]any{"timeoutSeconds": 0}}, "timeoutSeconds"},
		"a disruption budget of no pods":             {map[string]any{"podDisruptionBudget": map[string]any{"maxUnavailable": 0}}, "maxUnavailable"},
		"a spread that is no constraint":             {map[string]any{"topologySpreadConstraints": []any{map[string]any{"topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "Sometimes", "maxSkew": 1}}}, "whenUnsatisfiable"},
		"issuerRef without a name":                   {map[string]any{"webhook": map[string]any{"certManager": map[string]any{"enabled": true, "issuerRef": map[string]any{"kind": "ClusterIssuer"}}}}, "issuerRef needs a name"},
		// Helm keeps the release in its namespace, so that one exists before
		// the chart's objects: the chart cannot create it.
		"creating the release namespace":         {map[string]any{"namespace": map[string]any{"create": true}}, "namespace.create needs a namespace.name other than the release namespace"},
		"creating the release namespace by name": {map[string]any{"namespace": map[string]any{"create": true, "name": systemNamespace}}, "namespace.create needs a namespace.name other than the release namespace"},
		"the removed crds values":                {map[string]any{"crds": map[string]any{"enabled": false}}, "crds"},
	} {
		t.Run("rejects "+name, func(t *testing.T) {
			_, err := runHelm(t, "template", chartRelease, chartDir, "--namespace", systemNamespace, "--values", valuesFile(t, tc.values))
			if err == nil || !strings.Contains(err.Error(), tc.errSub) {
				t.Errorf("helm template: error %v, want one that mentions %q", err, tc.errSub)
			}
		})
	}
}

// TestChartRuntimeValues checks runtimes.catalog: every runtime of runtimes/
// has an entry in values.yaml, enabled, and in values.schema.json; an entry
// turns its runtime off or replaces its images, and nothing else; and names
// or containers that match nothing are rejected.
func TestChartRuntimeValues(t *testing.T) {
	// values.yaml and the schema list exactly the runtimes, all enabled.
	var values struct {
		Runtimes struct {
			Enabled bool                      `json:"enabled"`
			Catalog map[string]map[string]any `json:"catalog"`
		} `json:"runtimes"`
	}
	readJSONOrYAML(t, chartDir+"/values.yaml", &values)
	var schema struct {
		Properties struct {
			Runtimes struct {
				Properties struct {
					Catalog struct {
						Properties map[string]any `json:"properties"`
					} `json:"catalog"`
				} `json:"properties"`
			} `json:"runtimes"`
		} `json:"properties"`
	}
	readJSONOrYAML(t, chartDir+"/values.schema.json", &schema)
	var names []string
	for name := range catalog {
		names = append(names, name)
		if e := values.Runtimes.Catalog[name]; e["enabled"] != true || len(e) != 1 {
			t.Errorf("values.yaml: runtimes.catalog.%s is %v, want {enabled: true}", name, e)
		}
	}
	slices.Sort(names)
	if !values.Runtimes.Enabled {
		t.Error("values.yaml: runtimes.enabled is not true")
	}
	if diff := cmp.Diff(names, slices.Sorted(maps.Keys(values.Runtimes.Catalog))); diff != "" {
		t.Errorf("values.yaml: runtimes.catalog names differ from runtimes/ (-runtimes/ +values):\n%s", diff)
	}
	if diff := cmp.Diff(names, slices.Sorted(maps.Keys(schema.Properties.Runtimes.Properties.Catalog.Properties))); diff != "" {
		t.Errorf("values.schema.json: runtimes.catalog names differ from runtimes/ (-runtimes/ +schema):\n%s", diff)
	}

	files := loadRuntimes(t)
	runtimesIn := func(docs []doc) map[string]*trainer.ClusterTrainingRuntime {
		out := map[string]*trainer.ClusterTrainingRuntime{}
		for _, d := range docs {
			if d.kind() == trainer.ClusterTrainingRuntimeKind {
				out[d.name()] = decodeInto[trainer.ClusterTrainingRuntime](t, d)
			}
		}
		return out
	}
	// images returns the image of each container and init container of a
	// runtime, by <replicatedJob>/<container>.
	images := func(rt *trainer.ClusterTrainingRuntime) map[string]string {
		out := map[string]string{}
		for _, j := range rt.Spec.Template.Spec.ReplicatedJobs {
			ps := j.Template.Spec.Template.Spec
			for _, c := range slices.Concat(ps.InitContainers, ps.Containers) {
				out[j.Name+"/"+c.Name] = c.Image
			}
		}
		return out
	}
	withoutImages := func(rt *trainer.ClusterTrainingRuntime) trainer.TrainingRuntimeSpec {
		s := *rt.Spec.DeepCopy()
		for i := range s.Template.Spec.ReplicatedJobs {
			ps := &s.Template.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec
			for j := range ps.InitContainers {
				ps.InitContainers[j].Image = ""
			}
			for j := range ps.Containers {
				ps.Containers[j].Image = ""
			}
		}
		return s
	}

	const (
		off     = "torchtune-llama3.2-1b"
		torch   = "torch-distributed"
		mpi     = "mpi-distributed"
		dataset = "torch-distributed-with-dataset"
	)
	got := runtimesIn(renderChart(t, systemNamespace, map[string]any{"runtimes": map[string]any{"catalog": map[string]any{
		off:     map[string]any{"enabled": false},
		torch:   map[string]any{"image": "registry.internal/pytorch:2.7.1"},
		mpi:     map[string]any{"image": "registry.internal/openmpi:1", "images": map[string]any{"launcher/ssh-key": "registry.internal/debian:bookworm-slim"}},
		dataset: map[string]any{"images": map[string]any{"dataset-initializer/dataset-initializer": "registry.internal/dataset-initializer:v2.1.0"}},
	}}}))
	if _, ok := got[off]; ok || len(got) != len(catalog)-1 {
		t.Errorf("runtimes.catalog.%s.enabled=false: runtimes %v, want all others", off, slices.Sorted(maps.Keys(got)))
	}
	want := map[string]map[string]string{
		torch: {"node/node": "registry.internal/pytorch:2.7.1"},
		// image: the nodes and the launcher's node; images: the one named.
		mpi: {"node/node": "registry.internal/openmpi:1", "launcher/node": "registry.internal/openmpi:1", "launcher/ssh-key": "registry.internal/debian:bookworm-slim"},
		dataset: {
			"dataset-initializer/dataset-initializer": "registry.internal/dataset-initializer:v2.1.0",
			"node/node": images(files[dataset])["node/node"],
		},
	}
	for name, rt := range got {
		src := files[name]
		wantImages := want[name]
		if wantImages == nil {
			wantImages = images(src)
		}
		if diff := cmp.Diff(wantImages, images(rt)); diff != "" {
			t.Errorf("%s: images (-want +got):\n%s", name, diff)
		}
		if diff := cmp.Diff(withoutImages(src), withoutImages(rt)); diff != "" {
			t.Errorf("%s: spec differs from runtimes/%s.yaml beyond the images (-file +chart):\n%s", name, name, diff)
		}
	}

	for name, tc := range map[string]struct {
		values map[string]any
		errSub string
	}{
		"an unknown runtime":            {map[string]any{"torch-distributed-cpu": map[string]any{"enabled": false}}, "torch-distributed-cpu"},
		"an unknown container":          {map[string]any{torch: map[string]any{"images": map[string]any{"trainer/node": "x:1"}}}, `runtime torch-distributed has no container "trainer/node"`},
		"an unknown runtime setting":    {map[string]any{torch: map[string]any{"tag": "v1"}}, "tag"},
		"an enabled that is no boolean": {map[string]any{torch: map[string]any{"enabled": "no"}}, "enabled"},
	} {
		t.Run("rejects "+name, func(t *testing.T) {
			_, err := runHelm(t, "template", chartRelease, chartDir, "--namespace", systemNamespace,
				"--values", valuesFile(t, map[string]any{"runtimes": map[string]any{"catalog": tc.values}}))
			if err == nil || !strings.Contains(err.Error(), tc.errSub) {
				t.Errorf("helm template: error %v, want one that mentions %q", err, tc.errSub)
			}
		})
	}
}

// readJSONOrYAML decodes a file of the repository (JSON is YAML).
func readJSONOrYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, path))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// sdkCopy reports whether d is one of the objects that put the public version
// ConfigMap where the Kubeflow SDK looks by default (manifests/kubeflow-system,
// the chart's kubeflowSystem values): the namespace kubeflow-system, the
// ConfigMap and read access to it there.
func sdkCopy(d doc) bool {
	switch {
	case d.kind() == "Namespace":
		return d.name() == version.SDKNamespace
	case d.namespace() != version.SDKNamespace:
		return false
	case d.kind() == "ConfigMap":
		return d.name() == version.ConfigMapName
	case d.kind() == "Role" || d.kind() == "RoleBinding":
		return d.name() == publicConfigMapReaderRole
	}
	return false
}
