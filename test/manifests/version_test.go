package manifests

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/trainyard/trainyard/pkg/version"
)

// chartAppVersion is the appVersion of the chart's Chart.yaml: the Trainyard
// release it deploys.
func chartAppVersion(t *testing.T) string {
	t.Helper()
	var chartMeta struct {
		AppVersion string `json:"appVersion"`
	}
	b, err := os.ReadFile(filepath.Join(repoRoot, chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &chartMeta); err != nil {
		t.Fatal(err)
	}
	if chartMeta.AppVersion == "" {
		t.Fatalf("%s/Chart.yaml has no appVersion", chartDir)
	}
	return chartMeta.AppVersion
}

// TestPublicConfigMap checks the ConfigMap that Kubeflow's SDK and
// `trainyard version` read: the names and the Kubeflow Trainer version of
// pkg/version, Trainyard's version equal to the chart's appVersion (the chart
// renders the same object, TestChartDefaults), and read access to it alone for
// every authenticated user.
func TestPublicConfigMap(t *testing.T) {
	tr := base(t)
	if systemNamespace != version.DefaultNamespace {
		t.Errorf("the manifests install into %s, but pkg/version.DefaultNamespace (where `trainyard version` looks) is %s", systemNamespace, version.DefaultNamespace)
	}
	cm := decodeInto[corev1.ConfigMap](t, tr.find(t, "ConfigMap", version.ConfigMapName))
	want := version.ConfigMap(systemNamespace, chartAppVersion(t)).Data
	if diff := cmp.Diff(want, cm.Data); diff != "" {
		t.Errorf("ConfigMap %s data (-want +got):\n%s", version.ConfigMapName, diff)
	}

	role := decodeInto[rbacv1.Role](t, tr.find(t, "Role", publicConfigMapReaderRole))
	wantRules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"},
		ResourceNames: []string{version.ConfigMapName}, Verbs: []string{"get"}}}
	if diff := cmp.Diff(wantRules, role.Rules); diff != "" {
		t.Errorf("Role %s rules (-want +got):\n%s", publicConfigMapReaderRole, diff)
	}

	// The copy where the Kubeflow SDK looks by default says the same, and is
	// as readable (overlays/standalone installs it).
	sdk := render(t, "manifests/kubeflow-system")
	var kinds []string
	for _, d := range sdk {
		kinds = append(kinds, d.kind()+"/"+d.namespace()+"/"+d.name())
		if !sdkCopy(d) {
			t.Errorf("%s: not one of the SDK's copy", d)
		}
	}
	wantKinds := []string{"Namespace//" + version.SDKNamespace, "ConfigMap/" + version.SDKNamespace + "/" + version.ConfigMapName,
		"Role/" + version.SDKNamespace + "/" + publicConfigMapReaderRole, "RoleBinding/" + version.SDKNamespace + "/" + publicConfigMapReaderRole}
	slices.Sort(kinds)
	slices.Sort(wantKinds)
	if diff := cmp.Diff(wantKinds, kinds); diff != "" {
		t.Errorf("manifests/kubeflow-system (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(cm.Data, decodeInto[corev1.ConfigMap](t, findIn(t, sdk, "ConfigMap", version.ConfigMapName)).Data); diff != "" {
		t.Errorf("the ConfigMap in %s differs (-%s +%s):\n%s", version.SDKNamespace, systemNamespace, version.SDKNamespace, diff)
	}
	if diff := cmp.Diff(wantRules, decodeInto[rbacv1.Role](t, findIn(t, sdk, "Role", publicConfigMapReaderRole)).Rules); diff != "" {
		t.Errorf("Role %s in %s rules (-want +got):\n%s", publicConfigMapReaderRole, version.SDKNamespace, diff)
	}
	if !slices.ContainsFunc(render(t, "manifests/overlays/standalone"), func(d doc) bool {
		return d.kind() == "ConfigMap" && d.namespace() == version.SDKNamespace
	}) {
		t.Errorf("overlays/standalone does not install the ConfigMap in %s", version.SDKNamespace)
	}
}
