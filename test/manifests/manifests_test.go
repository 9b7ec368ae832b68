// Package manifests checks the deployment manifests under manifests/ and the
// Dockerfile without a cluster: that every document parses into its API type,
// that RBAC is least privilege and matches what the controller needs, that the
// manager runs with a restricted security context, and that the generated RBAC
// is up to date with the +kubebuilder:rbac markers.
package manifests

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const (
	// repoRoot is the repository root, relative to this package (go test runs
	// in the package directory).
	repoRoot = "../.."

	systemNamespace    = "trainyard-system"
	managerName        = "trainyard-manager"
	leaderElectionRole = "trainyard-leader-election"
	metricsService     = "trainyard-manager-metrics"
	managerImage       = "ghcr.io/trainyard/trainyard-manager"

	regenerateRBAC = "bin/controller-gen rbac:roleName=trainyard-manager paths=./pkg/... output:rbac:artifacts:config=manifests/base/rbac"
)

// doc is one YAML document of a manifest file.
type doc struct {
	file  string // relative to the repository root
	index int    // position in the file, from 0
	json  []byte
	obj   map[string]any
}

func (d doc) String() string {
	return fmt.Sprintf("%s#%d (%s %s)", d.file, d.index, d.kind(), d.name())
}
func (d doc) apiVersion() string { return str(d.obj["apiVersion"]) }
func (d doc) kind() string       { return str(d.obj["kind"]) }
func (d doc) name() string       { return str(meta(d.obj)["name"]) }
func (d doc) namespace() string  { return str(meta(d.obj)["namespace"]) }

func meta(obj map[string]any) map[string]any {
	m, _ := obj["metadata"].(map[string]any)
	return m
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// decodeDocs splits a multi-document YAML stream and converts each non-empty
// document to JSON and to a generic object.
func decodeDocs(name string, r io.Reader) ([]doc, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	var docs []doc
	for i := 0; ; i++ {
		chunk, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, i, err)
		}
		js, err := yaml.YAMLToJSON(chunk)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, i, err)
		}
		if t := bytes.TrimSpace(js); len(t) == 0 || string(t) == "null" {
			continue // empty document, e.g. a leading "---" or only comments
		}
		var obj map[string]any
		if err := yaml.Unmarshal(js, &obj); err != nil {
			return nil, fmt.Errorf("%s: document %d is not an object: %w", name, i, err)
		}
		docs = append(docs, doc{file: name, index: i, json: js, obj: obj})
	}
}

func isYAML(path string) bool {
	ext := filepath.Ext(path)
	return ext == ".yaml" || ext == ".yml"
}

func isKustomization(path string) bool { return filepath.Base(path) == "kustomization.yaml" }

// loadTree parses every YAML file under dir (relative to the repository
// root). Kustomization files are returned apart from the resources.
func loadTree(dir string) (resources []doc, kustomizations map[string]kustomization, err error) {
	kustomizations = map[string]kustomization{}
	root := filepath.Join(repoRoot, dir)
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !isYAML(path) {
			return err
		}
		rel, err := filepath.Rel(repoRoot, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if isKustomization(path) {
			var k kustomization
			if err := yaml.UnmarshalStrict(data, &k); err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
			kustomizations[filepath.ToSlash(filepath.Dir(rel))] = k
			return nil
		}
		docs, err := decodeDocs(rel, bytes.NewReader(data))
		if err != nil {
			return err
		}
		if len(docs) == 0 {
			return fmt.Errorf("%s: no YAML documents", rel)
		}
		resources = append(resources, docs...)
		return nil
	})
	return resources, kustomizations, err
}

// kustomization holds the fields of kustomization.yaml this repository uses;
// strict decoding makes any other (or misspelt) field an error.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace,omitempty"`
	Resources  []string `json:"resources,omitempty"`
	Images     []image  `json:"images,omitempty"`
}

// image is an entry of a kustomization's images field.
type image struct {
	Name    string `json:"name"`
	NewName string `json:"newName,omitempty"`
	NewTag  string `json:"newTag,omitempty"`
	Digest  string `json:"digest,omitempty"`
}

type tree struct {
	docs           []doc
	kustomizations map[string]kustomization
}

var loadBase = sync.OnceValues(func() (tree, error) {
	docs, ks, err := loadTree("manifests/base")
	return tree{docs, ks}, err
})

func base(t *testing.T) tree {
	t.Helper()
	tr, err := loadBase()
	if err != nil {
		t.Fatalf("loading manifests/base: %v", err)
	}
	if len(tr.docs) == 0 {
		t.Fatal("no manifests found under manifests/base")
	}
	return tr
}

// find returns the single document of the given kind and name.
func (tr tree) find(t *testing.T, kind, name string) doc {
	t.Helper()
	var found []doc
	for _, d := range tr.docs {
		if d.kind() == kind && d.name() == name {
			found = append(found, d)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want exactly one %s %q in manifests/base, found %d", kind, name, len(found))
	}
	return found[0]
}

func decodeInto[T any](t *testing.T, d doc) *T {
	t.Helper()
	obj := new(T)
	if err := yaml.UnmarshalStrict(d.json, obj); err != nil {
		t.Fatalf("%s: %v", d, err)
	}
	return obj
}

// typed maps each kind the manifests may contain to its API version and a
// constructor of its Go type, for strict decoding.
var typed = map[string]struct {
	apiVersion string
	namespaced bool
	new        func() any
}{
	"Namespace":                {"v1", false, func() any { return &corev1.Namespace{} }},
	"ServiceAccount":           {"v1", true, func() any { return &corev1.ServiceAccount{} }},
	"Service":                  {"v1", true, func() any { return &corev1.Service{} }},
	"Deployment":               {"apps/v1", true, func() any { return &appsv1.Deployment{} }},
	"Role":                     {"rbac.authorization.k8s.io/v1", true, func() any { return &rbacv1.Role{} }},
	"RoleBinding":              {"rbac.authorization.k8s.io/v1", true, func() any { return &rbacv1.RoleBinding{} }},
	"ClusterRole":              {"rbac.authorization.k8s.io/v1", false, func() any { return &rbacv1.ClusterRole{} }},
	"ClusterRoleBinding":       {"rbac.authorization.k8s.io/v1", false, func() any { return &rbacv1.ClusterRoleBinding{} }},
	"CustomResourceDefinition": {"apiextensions.k8s.io/v1", false, func() any { return &apiextensionsv1.CustomResourceDefinition{} }},
}

// TestManifestsParse parses every YAML document under manifests/ and checks
// that each object names its apiVersion, kind and metadata.name, decodes
// strictly into its API type, and is unique.
func TestManifestsParse(t *testing.T) {
	tr := base(t)
	seen := map[string]string{}
	for _, d := range tr.docs {
		if d.apiVersion() == "" || d.kind() == "" || d.name() == "" {
			t.Errorf("%s: apiVersion, kind and metadata.name must all be set", d)
			continue
		}
		ty, ok := typed[d.kind()]
		if !ok {
			t.Errorf("%s: kind %s is not known to this test; add it to the typed table", d, d.kind())
			continue
		}
		if d.apiVersion() != ty.apiVersion {
			t.Errorf("%s: apiVersion %s, want %s", d, d.apiVersion(), ty.apiVersion)
		}
		if err := yaml.UnmarshalStrict(d.json, ty.new()); err != nil {
			t.Errorf("%s: does not decode strictly into %s: %v", d, d.kind(), err)
		}
		switch ns := d.namespace(); {
		case ty.namespaced && ns != "" && ns != systemNamespace:
			t.Errorf("%s: namespace %q, want %q (or none)", d, ns, systemNamespace)
		case !ty.namespaced && ns != "":
			t.Errorf("%s: cluster-scoped object has namespace %q", d, ns)
		}
		key := d.kind() + "/" + d.name()
		if prev, dup := seen[key]; dup {
			t.Errorf("%s: duplicate of %s", d, prev)
		}
		seen[key] = d.String()
	}

	// The overlays must parse too.
	docs, ks, err := loadTree("manifests/overlays")
	if err != nil {
		t.Fatalf("loading manifests/overlays: %v", err)
	}
	if len(ks) == 0 {
		t.Error("no kustomization found under manifests/overlays")
	}
	for _, d := range docs {
		if d.apiVersion() == "" || d.kind() == "" || d.name() == "" {
			t.Errorf("%s: apiVersion, kind and metadata.name must all be set", d)
		}
	}
}

// TestKustomizations checks that each kustomization's resources exist and that
// no manifest is left out of its directory's kustomization.
func TestKustomizations(t *testing.T) {
	tr := base(t)
	_, overlays, err := loadTree("manifests/overlays")
	if err != nil {
		t.Fatalf("loading manifests/overlays: %v", err)
	}
	all := map[string]kustomization{}
	for dir, k := range tr.kustomizations {
		all[dir] = k
	}
	for dir, k := range overlays {
		all[dir] = k
	}
	for _, dir := range []string{"manifests/base", "manifests/base/crds", "manifests/base/rbac", "manifests/base/manager", "manifests/overlays/standalone"} {
		if _, ok := all[dir]; !ok {
			t.Errorf("%s/kustomization.yaml is missing", dir)
		}
	}

	for dir, k := range all {
		if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
			t.Errorf("%s/kustomization.yaml: apiVersion/kind %s/%s, want kustomize.config.k8s.io/v1beta1/Kustomization", dir, k.APIVersion, k.Kind)
		}
		listed := map[string]bool{}
		for _, r := range k.Resources {
			p := filepath.Join(repoRoot, dir, r)
			fi, err := os.Stat(p)
			switch {
			case err != nil:
				t.Errorf("%s/kustomization.yaml: resource %q: %v", dir, r, err)
			case fi.IsDir():
				if _, err := os.Stat(filepath.Join(p, "kustomization.yaml")); err != nil {
					t.Errorf("%s/kustomization.yaml: resource %q is a directory without kustomization.yaml", dir, r)
				}
			}
			listed[filepath.Clean(r)] = true
		}
		entries, err := os.ReadDir(filepath.Join(repoRoot, dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.IsDir() {
				if _, err := os.Stat(filepath.Join(repoRoot, dir, e.Name(), "kustomization.yaml")); err == nil && !listed[e.Name()] && strings.HasPrefix(dir, "manifests/base") {
					t.Errorf("%s/kustomization.yaml does not list the directory %s/", dir, e.Name())
				}
				continue
			}
			if isYAML(e.Name()) && !isKustomization(e.Name()) && !listed[e.Name()] {
				t.Errorf("%s/kustomization.yaml does not list %s", dir, e.Name())
			}
		}
	}

	if ns := all["manifests/base"].Namespace; ns != systemNamespace {
		t.Errorf("manifests/base/kustomization.yaml: namespace %q, want %q", ns, systemNamespace)
	}
	tr.find(t, "Namespace", systemNamespace)

	var crdFiles []string
	for _, d := range tr.docs {
		if strings.HasPrefix(d.file, "manifests/base/crds/") {
			crdFiles = append(crdFiles, filepath.Base(d.file))
			if d.kind() != "CustomResourceDefinition" {
				t.Errorf("%s: only CRDs belong in manifests/base/crds", d)
			}
		}
	}
	wantCRDs := []string{
		"trainer.kubeflow.org_clustertrainingruntimes.yaml",
		"trainer.kubeflow.org_trainingruntimes.yaml",
		"trainer.kubeflow.org_trainjobs.yaml",
	}
	gotCRDs := slices.Clone(all["manifests/base/crds"].Resources)
	sort.Strings(crdFiles)
	sort.Strings(gotCRDs)
	if diff := cmp.Diff(wantCRDs, crdFiles); diff != "" {
		t.Errorf("CRD files in manifests/base/crds (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantCRDs, gotCRDs); diff != "" {
		t.Errorf("resources of manifests/base/crds/kustomization.yaml (-want +got):\n%s", diff)
	}

	// The standalone overlay builds on the base and sets the manager image.
	standalone := all["manifests/overlays/standalone"]
	if !slices.Contains(standalone.Resources, "../../base") {
		t.Errorf("manifests/overlays/standalone: resources %q do not include ../../base", standalone.Resources)
	}
	if !slices.ContainsFunc(standalone.Images, func(i image) bool {
		return i.Name == managerImage && (i.NewTag != "" || i.Digest != "")
	}) {
		t.Errorf("manifests/overlays/standalone: images must set a tag or digest for %s", managerImage)
	}
}

// rules flattens RBAC rules into sorted "group/resource: verb" permissions.
func rules(rs []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rs {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out = append(out, fmt.Sprintf("%s/%s: %s", g, res, v))
				}
			}
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

func permissions(group string, resources []string, verbs ...string) []string {
	var out []string
	for _, r := range resources {
		for _, v := range verbs {
			out = append(out, fmt.Sprintf("%s/%s: %s", group, r, v))
		}
	}
	return out
}

func sorted(parts ...[]string) []string {
	out := slices.Concat(parts...)
	sort.Strings(out)
	return out
}

// TestRBACNoWildcards checks that no Role or ClusterRole grants "*" (or any
// pattern) in apiGroups, resources, verbs, resourceNames or nonResourceURLs,
// and that none aggregates other roles.
func TestRBACNoWildcards(t *testing.T) {
	tr := base(t)
	n := 0
	for _, d := range tr.docs {
		var rs []rbacv1.PolicyRule
		switch d.kind() {
		case "Role":
			rs = decodeInto[rbacv1.Role](t, d).Rules
		case "ClusterRole":
			cr := decodeInto[rbacv1.ClusterRole](t, d)
			if cr.AggregationRule != nil {
				t.Errorf("%s: aggregationRule grants whatever other roles hold", d)
			}
			rs = cr.Rules
		default:
			continue
		}
		n++
		if len(rs) == 0 {
			t.Errorf("%s: no rules", d)
		}
		for i, r := range rs {
			for field, vals := range map[string][]string{
				"apiGroups": r.APIGroups, "resources": r.Resources, "verbs": r.Verbs,
				"resourceNames": r.ResourceNames, "nonResourceURLs": r.NonResourceURLs,
			} {
				for _, v := range vals {
					if strings.Contains(v, "*") {
						t.Errorf("%s: rule %d: wildcard %q in %s", d, i, v, field)
					}
				}
			}
			if len(r.Verbs) == 0 || len(r.Resources) == 0 || len(r.APIGroups) == 0 {
				t.Errorf("%s: rule %d must name apiGroups, resources and verbs: %+v", d, i, r)
			}
		}
	}
	if n == 0 {
		t.Fatal("no Role or ClusterRole found")
	}
}

// TestManagerClusterRole checks that the manager's ClusterRole grants exactly
// what the controller needs: no more, no less.
func TestManagerClusterRole(t *testing.T) {
	cr := decodeInto[rbacv1.ClusterRole](t, base(t).find(t, "ClusterRole", managerName))
	want := sorted(
		permissions("trainer.kubeflow.org", []string{"trainjobs"}, "get", "list", "watch", "update", "patch"),
		permissions("trainer.kubeflow.org", []string{"trainjobs/status"}, "get", "update", "patch"),
		// Setting blockOwnerDeletion on the JobSet needs this where OwnerReferencesPermissionEnforcement is on.
		permissions("trainer.kubeflow.org", []string{"trainjobs/finalizers"}, "update"),
		permissions("trainer.kubeflow.org", []string{"trainingruntimes", "clustertrainingruntimes"}, "get", "list", "watch"),
		permissions("jobset.x-k8s.io", []string{"jobsets"}, "get", "list", "watch", "create", "update", "patch", "delete"),
		permissions("events.k8s.io", []string{"events"}, "create", "patch", "update"),
	)
	if diff := cmp.Diff(want, rules(cr.Rules)); diff != "" {
		t.Errorf("ClusterRole %s permissions (-want +got):\n%s", managerName, diff)
	}
}

// TestLeaderElectionRole checks that leader election is granted by a
// namespaced Role with exactly the Lease and Event permissions it uses.
func TestLeaderElectionRole(t *testing.T) {
	d := base(t).find(t, "Role", leaderElectionRole)
	role := decodeInto[rbacv1.Role](t, d)
	if ns := role.Namespace; ns != systemNamespace {
		t.Errorf("%s: namespace %q, want %q", d, ns, systemNamespace)
	}
	want := sorted(
		permissions("coordination.k8s.io", []string{"leases"}, "get", "list", "watch", "create", "update", "patch", "delete"),
		permissions("events.k8s.io", []string{"events"}, "create", "patch"),
		// controller-runtime's leader-election recorder writes core/v1 Events.
		permissions("", []string{"events"}, "create", "patch"),
	)
	if diff := cmp.Diff(want, rules(role.Rules)); diff != "" {
		t.Errorf("Role %s permissions (-want +got):\n%s", leaderElectionRole, diff)
	}
}

// TestRoleBindings checks that both roles are bound to the manager's
// ServiceAccount, and to nothing else.
func TestRoleBindings(t *testing.T) {
	tr := base(t)
	tr.find(t, "ServiceAccount", managerName)
	wantSubjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: managerName, Namespace: systemNamespace}}

	crb := decodeInto[rbacv1.ClusterRoleBinding](t, tr.find(t, "ClusterRoleBinding", managerName))
	if diff := cmp.Diff(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: managerName}, crb.RoleRef); diff != "" {
		t.Errorf("ClusterRoleBinding %s roleRef (-want +got):\n%s", managerName, diff)
	}
	if diff := cmp.Diff(wantSubjects, crb.Subjects); diff != "" {
		t.Errorf("ClusterRoleBinding %s subjects (-want +got):\n%s", managerName, diff)
	}

	rb := decodeInto[rbacv1.RoleBinding](t, tr.find(t, "RoleBinding", leaderElectionRole))
	if diff := cmp.Diff(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: leaderElectionRole}, rb.RoleRef); diff != "" {
		t.Errorf("RoleBinding %s roleRef (-want +got):\n%s", leaderElectionRole, diff)
	}
	if diff := cmp.Diff(wantSubjects, rb.Subjects); diff != "" {
		t.Errorf("RoleBinding %s subjects (-want +got):\n%s", leaderElectionRole, diff)
	}
	if rb.Namespace != systemNamespace {
		t.Errorf("RoleBinding %s: namespace %q, want %q", leaderElectionRole, rb.Namespace, systemNamespace)
	}

	// Every binding must refer to a role defined here.
	for _, d := range tr.docs {
		var ref rbacv1.RoleRef
		switch d.kind() {
		case "RoleBinding":
			ref = decodeInto[rbacv1.RoleBinding](t, d).RoleRef
		case "ClusterRoleBinding":
			ref = decodeInto[rbacv1.ClusterRoleBinding](t, d).RoleRef
		default:
			continue
		}
		if !slices.ContainsFunc(tr.docs, func(o doc) bool { return o.kind() == ref.Kind && o.name() == ref.Name }) {
			t.Errorf("%s: roleRef %s %q is not defined in manifests/base", d, ref.Kind, ref.Name)
		}
	}
}

// managerFlags returns the flags that the manager binary accepts, from its
// -h output. It builds the binary, so it is skipped with -short.
var managerFlags = sync.OnceValues(func() (map[string]bool, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "trainyard-manifests-test")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	bin := filepath.Join(dir, "trainyard-manager")
	build := exec.Command(goBin, "build", "-o", bin, "./cmd/trainyard-manager")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build ./cmd/trainyard-manager: %w\n%s", err, out)
	}
	// -h prints the usage and exits (0 or 2 depending on the flag set).
	out, _ := exec.Command(bin, "-h").CombinedOutput()
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+-([A-Za-z0-9][A-Za-z0-9_.-]*)`).FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	if len(flags) == 0 {
		return nil, fmt.Errorf("no flags in the output of trainyard-manager -h:\n%s", out)
	}
	return flags, nil
})

// addrPort returns the port of a listen address such as ":8080".
func addrPort(t *testing.T, addr string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	n, err := strconv.ParseInt(p, 10, 32)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	return int32(n)
}

// containerPort resolves a probe or Service target port against a container.
func containerPort(c corev1.Container, p intstr.IntOrString) int32 {
	if p.Type == intstr.Int {
		return p.IntVal
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort
		}
	}
	return -1
}

// TestManagerDeployment checks the manager's Deployment: restricted pod and
// container security contexts, resources, probes, ports and arguments.
func TestManagerDeployment(t *testing.T) {
	tr := base(t)
	dep := decodeInto[appsv1.Deployment](t, tr.find(t, "Deployment", managerName))
	spec := dep.Spec.Template.Spec

	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 1 {
		t.Errorf("replicas: %v, want 1", dep.Spec.Replicas)
	}
	if spec.ServiceAccountName != managerName {
		t.Errorf("serviceAccountName %q, want %q", spec.ServiceAccountName, managerName)
	}
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		t.Error("the pod must not use the host's network, PID or IPC namespaces")
	}
	sel := dep.Spec.Selector
	if sel == nil || len(sel.MatchLabels) == 0 {
		t.Fatal("the Deployment needs spec.selector.matchLabels")
	}
	for k, v := range sel.MatchLabels {
		if dep.Spec.Template.Labels[k] != v {
			t.Errorf("selector label %s=%s is not on the pod template", k, v)
		}
	}

	// Pod security context.
	psc := spec.SecurityContext
	if psc == nil {
		t.Fatal("the pod has no securityContext")
	}
	if psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Error("pod securityContext.runAsNonRoot must be true")
	}
	if psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("pod securityContext.seccompProfile.type must be RuntimeDefault")
	}

	// Container security contexts.
	if len(spec.Containers) != 1 {
		t.Fatalf("want 1 container, got %d", len(spec.Containers))
	}
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		sc := c.SecurityContext
		if sc == nil {
			t.Errorf("container %s has no securityContext", c.Name)
			continue
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("container %s: allowPrivilegeEscalation must be false", c.Name)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("container %s: readOnlyRootFilesystem must be true", c.Name)
		}
		if sc.Privileged != nil && *sc.Privileged {
			t.Errorf("container %s must not be privileged", c.Name)
		}
		if sc.RunAsNonRoot != nil && !*sc.RunAsNonRoot {
			t.Errorf("container %s: runAsNonRoot must not be false", c.Name)
		}
		if sc.RunAsUser != nil && *sc.RunAsUser == 0 {
			t.Errorf("container %s must not run as root", c.Name)
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			t.Errorf("container %s: capabilities.drop must include ALL", c.Name)
		} else if len(sc.Capabilities.Add) > 0 {
			t.Errorf("container %s: capabilities.add must be empty, got %v", c.Name, sc.Capabilities.Add)
		}
		if sc.SeccompProfile != nil && sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("container %s: seccompProfile.type must be RuntimeDefault", c.Name)
		}
	}

	c := spec.Containers[0]
	if img, _, _ := strings.Cut(c.Image, ":"); img != managerImage {
		t.Errorf("image %q; the overlays set %s, so the base must use that name", c.Image, managerImage)
	}

	// Resources.
	req, lim := c.Resources.Requests, c.Resources.Limits
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := req[r]; !ok || q.IsZero() {
			t.Errorf("container %s: no %s request", c.Name, r)
		}
	}
	if q, ok := lim[corev1.ResourceMemory]; !ok || q.IsZero() {
		t.Errorf("container %s: no memory limit", c.Name)
	} else if r := req[corev1.ResourceMemory]; r.Cmp(q) > 0 {
		t.Errorf("container %s: memory request %s exceeds limit %s", c.Name, r.String(), q.String())
	}
	if q, ok := lim[corev1.ResourceCPU]; ok && q.Cmp(resource.MustParse("100m")) < 0 {
		t.Errorf("container %s: CPU limit %s is too small to run the manager", c.Name, q.String())
	}

	// Arguments.
	for _, want := range []string{
		"--leader-elect",
		"--leader-election-namespace=$(POD_NAMESPACE)",
		"--metrics-bind-address=:8080",
		"--health-probe-bind-address=:8081",
	} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("container %s: args %q lack %q", c.Name, c.Args, want)
		}
	}
	args := map[string]string{}
	for _, a := range c.Args {
		name, val, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		args[name] = val
	}
	if testing.Short() {
		t.Log("-short: not checking the args against the manager's flags")
	} else if flags, err := managerFlags(); err != nil {
		t.Errorf("reading the manager's flags: %v", err)
	} else {
		for name := range args {
			if !flags[name] {
				t.Errorf("container %s: trainyard-manager has no flag -%s", c.Name, name)
			}
		}
	}
	envOK := slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "POD_NAMESPACE" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil &&
			e.ValueFrom.FieldRef.FieldPath == "metadata.namespace"
	})
	if !envOK {
		t.Errorf("container %s: POD_NAMESPACE must come from the downward API (fieldRef metadata.namespace)", c.Name)
	}

	// Ports and probes, consistent with the bind addresses.
	for _, name := range []string{"metrics-bind-address", "health-probe-bind-address"} {
		if args[name] == "" {
			t.Fatalf("container %s: no --%s=ADDRESS in args; cannot check its ports", c.Name, name)
		}
	}
	metricsPort := addrPort(t, args["metrics-bind-address"])
	probePort := addrPort(t, args["health-probe-bind-address"])
	if metricsPort != 8080 || probePort != 8081 {
		t.Errorf("metrics on %d and probes on %d, want 8080 and 8081", metricsPort, probePort)
	}
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool {
		return p.Name == "metrics" && p.ContainerPort == metricsPort
	}) {
		t.Errorf("container %s: no port named metrics on %d", c.Name, metricsPort)
	}
	for _, p := range []struct {
		kind, path string
		probe      *corev1.Probe
	}{{"liveness", "/healthz", c.LivenessProbe}, {"readiness", "/readyz", c.ReadinessProbe}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("container %s: no HTTP %s probe", c.Name, p.kind)
			continue
		}
		if got := p.probe.HTTPGet.Path; got != p.path {
			t.Errorf("container %s: %s probe path %q, want %q", c.Name, p.kind, got, p.path)
		}
		if got := containerPort(c, p.probe.HTTPGet.Port); got != probePort {
			t.Errorf("container %s: %s probe port %d, want %d", c.Name, p.kind, got, probePort)
		}
	}

	// The metrics Service selects the manager's pods and reaches the metrics port.
	svc := decodeInto[corev1.Service](t, tr.find(t, "Service", metricsService))
	if len(svc.Spec.Selector) == 0 {
		t.Errorf("Service %s has no selector", metricsService)
	}
	for k, v := range svc.Spec.Selector {
		if dep.Spec.Template.Labels[k] != v {
			t.Errorf("Service %s selects %s=%s, which the manager's pods lack", metricsService, k, v)
		}
	}
	if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool {
		target := p.TargetPort
		if target.Type == intstr.Int && target.IntVal == 0 {
			target = intstr.FromInt32(p.Port)
		}
		return p.Port == 8080 && containerPort(c, target) == metricsPort
	}) {
		t.Errorf("Service %s must expose port 8080 to the manager's metrics port", metricsService)
	}
}

// TestGeneratedRBACUpToDate regenerates the ClusterRole with controller-gen
// and compares it with manifests/base/rbac/role.yaml.
func TestGeneratedRBACUpToDate(t *testing.T) {
	bin, err := filepath.Abs(filepath.Join(repoRoot, "bin", "controller-gen"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); errors.Is(err, fs.ErrNotExist) {
		t.Skipf("controller-gen not found at %s; install the pinned controller-gen (v0.20.1) there to check that manifests/base/rbac/role.yaml is up to date", bin)
	}
	out := t.TempDir()
	cmd := exec.Command(bin, "rbac:roleName="+managerName, "paths=./pkg/...", "output:rbac:artifacts:config="+out)
	cmd.Dir = repoRoot
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, b)
	}
	generated, err := os.ReadFile(filepath.Join(out, "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile(filepath.Join(repoRoot, "manifests", "base", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(generated), string(committed)); diff != "" {
		t.Errorf("manifests/base/rbac/role.yaml is out of date with the +kubebuilder:rbac markers; regenerate it with\n  %s\n(-generated +committed):\n%s", regenerateRBAC, diff)
	}
}

// kubectl returns the kubectl binary of the repository, or one on PATH.
func kubectl(t *testing.T) string {
	t.Helper()
	if p, err := filepath.Abs(filepath.Join(repoRoot, "bin", "k8s", "kubectl")); err == nil {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	p, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not found in bin/k8s or on PATH; skipping the kustomize build")
	}
	return p
}

// TestKustomizeBuild renders the base and the standalone overlay with
// `kubectl kustomize` (no cluster needed) and checks the result.
func TestKustomizeBuild(t *testing.T) {
	kc := kubectl(t)
	tr := base(t)
	want := map[string]bool{}
	for _, d := range tr.docs {
		want[d.kind()+"/"+d.name()] = true
	}
	for _, dir := range []string{"manifests/base", "manifests/overlays/standalone"} {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			cmd := exec.Command(kc, "kustomize", dir)
			cmd.Dir = repoRoot
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, stderr.String())
			}
			docs, err := decodeDocs(dir, bytes.NewReader(out))
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			for _, d := range docs {
				got[d.kind()+"/"+d.name()] = true
				ty, ok := typed[d.kind()]
				switch {
				case !ok:
					t.Errorf("unexpected kind in output: %s", d)
				case ty.namespaced && d.namespace() != systemNamespace:
					t.Errorf("%s: namespace %q, want %q", d, d.namespace(), systemNamespace)
				}
				if d.kind() == "Deployment" && d.name() == managerName {
					dep := decodeInto[appsv1.Deployment](t, d)
					if img := dep.Spec.Template.Spec.Containers[0].Image; !strings.HasPrefix(img, managerImage+":") && !strings.HasPrefix(img, managerImage+"@") {
						t.Errorf("manager image %q, want %s with a tag or digest", img, managerImage)
					}
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("objects rendered from %s differ from the files under manifests/base (-files +rendered):\n%s", dir, diff)
			}
		})
	}
}

// TestDockerfile checks the Dockerfile's stages and that its build context
// holds every package of this module that the manager imports.
func TestDockerfile(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var from, copied []string
	var user, entrypoint, build string
	// Join continuation lines, so that each instruction is one line.
	text := strings.ReplaceAll(string(data), "\\\n", " ")
	for _, line := range strings.Split(text, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		switch strings.ToUpper(fields[0]) {
		case "FROM":
			from = append(from, fields[1])
		case "COPY":
			if len(from) == 1 && len(fields) >= 3 && !strings.HasPrefix(fields[1], "--") {
				for _, src := range fields[1 : len(fields)-1] {
					copied = append(copied, strings.TrimSuffix(src, "/"))
				}
			}
		case "USER":
			user = strings.Join(fields[1:], " ")
		case "ENTRYPOINT":
			entrypoint = strings.Join(fields[1:], " ")
		case "RUN":
			if strings.Contains(line, "go build") {
				build = line
			}
		}
	}
	if diff := cmp.Diff([]string{"golang:1.26", "gcr.io/distroless/static:nonroot"}, from); diff != "" {
		t.Errorf("Dockerfile stages (-want +got):\n%s", diff)
	}
	if user != "65532:65532" {
		t.Errorf("USER %q, want 65532:65532", user)
	}
	if entrypoint != `["/trainyard-manager"]` {
		t.Errorf("ENTRYPOINT %s, want [\"/trainyard-manager\"]", entrypoint)
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "-o /out/trainyard-manager ./cmd/trainyard-manager"} {
		if !strings.Contains(build, want) {
			t.Errorf("the builder's go build step lacks %q: %s", want, build)
		}
	}

	ignored := map[string]bool{}
	if b, err := os.ReadFile(filepath.Join(repoRoot, ".dockerignore")); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				ignored[strings.Trim(l, "/")] = true
			}
		}
	}
	for _, c := range copied {
		if ignored[c] {
			t.Errorf("the Dockerfile copies %s, but .dockerignore excludes it", c)
		}
	}
	for _, need := range []string{"go.mod", "go.sum"} {
		if !slices.Contains(copied, need) {
			t.Errorf("the builder stage does not copy %s", need)
		}
	}

	if testing.Short() {
		t.Skip("-short: not listing the manager's packages")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go not on PATH")
	}
	cmd := exec.Command(goBin, "list", "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{.Dir}}{{end}}{{end}}", "./cmd/trainyard-manager")
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			t.Fatal(err)
		}
		top, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
		if !slices.Contains(copied, top) {
			t.Errorf("the manager imports a package in %s, but the Dockerfile does not copy %s/", rel, top)
		}
	}
}
