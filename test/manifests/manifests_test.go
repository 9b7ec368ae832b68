// Package manifests checks the deployment manifests under manifests/ and the
// Dockerfile without a cluster: that every document parses into its API type,
// that RBAC is least privilege and matches what the controller and its webhook
// certificate rotation need, that the manager runs with a restricted security
// context and serves its webhooks behind a Service, that the overlays render,
// and that the generated RBAC and webhook configurations are up to date with
// their markers.
//
// The tests are split by subject: this file (parsing, kustomizations,
// rendering), rbac_test.go, deployment_test.go, webhook_test.go and
// dockerfile_test.go.
package manifests

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/trainyard/trainyard/test/prereq"
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

	// Webhooks: the Service in front of the manager's webhook server, the
	// Secret with its certificate (mounted at webhookCertDir), and the names
	// of the webhook configurations after the renames in
	// manifests/base/webhook/kustomization.yaml.
	webhookService        = "trainyard-webhook"
	webhookSecret         = "trainyard-webhook-cert"
	webhookPort           = 9443
	webhookPortName       = "webhook-server"
	webhookCertDir        = "/tmp/k8s-webhook-server/serving-certs"
	mutatingWebhookName   = "trainyard-mutating-webhook-configuration"
	validatingWebhookName = "trainyard-validating-webhook-configuration"
	// The names controller-gen gives the configurations in manifests.yaml.
	generatedMutatingName   = "mutating-webhook-configuration"
	generatedValidatingName = "validating-webhook-configuration"
	// RBAC of the manager's built-in webhook certificate rotation.
	certRotationRole = "trainyard-cert-rotation"
	// RBAC for the users of the cluster: namespace roles aggregated into the
	// built-in view, edit and admin; read access to the ClusterTrainingRuntimes
	// for everyone; and who may scrape the manager's metrics.
	viewRole          = "trainyard-view"
	editRole          = "trainyard-edit"
	runtimeReaderRole = "trainyard-runtime-reader"
	metricsReaderRole = "trainyard-metrics-reader"
	// Everyone's read access to the public ConfigMap with the control plane's
	// version (pkg/version.ConfigMapName).
	publicConfigMapReaderRole = "trainyard-public-configmap-reader"

	regenerateRBAC     = "bin/controller-gen rbac:roleName=trainyard-manager paths=./pkg/... output:rbac:artifacts:config=manifests/base/rbac"
	regenerateWebhooks = "bin/controller-gen webhook paths=./pkg/webhooks/... output:webhook:artifacts:config=manifests/base/webhook"
)

// aggregatedRoles are the user roles, which reach users through the built-in
// ClusterRoles they are aggregated into, not through bindings of their own.
var aggregatedRoles = []string{viewRole, editRole}

// allAuthenticated is the subject of every authenticated user and
// ServiceAccount.
var allAuthenticated = []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "Group", Name: "system:authenticated"}}

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
	APIVersion   string        `json:"apiVersion"`
	Kind         string        `json:"kind"`
	Namespace    string        `json:"namespace,omitempty"`
	Resources    []string      `json:"resources,omitempty"`
	Images       []image       `json:"images,omitempty"`
	Patches      []patch       `json:"patches,omitempty"`
	Replacements []replacement `json:"replacements,omitempty"`
}

// patch is an entry of a kustomization's patches field: a strategic merge or
// JSON 6902 patch, inline or in a file, optionally with a target.
type patch struct {
	Path   string    `json:"path,omitempty"`
	Patch  string    `json:"patch,omitempty"`
	Target *selector `json:"target,omitempty"`
}

// selector picks the objects a patch or replacement applies to.
type selector struct {
	Group              string `json:"group,omitempty"`
	Version            string `json:"version,omitempty"`
	Kind               string `json:"kind,omitempty"`
	Name               string `json:"name,omitempty"`
	Namespace          string `json:"namespace,omitempty"`
	LabelSelector      string `json:"labelSelector,omitempty"`
	AnnotationSelector string `json:"annotationSelector,omitempty"`
}

// replacement is an entry of a kustomization's replacements field.
type replacement struct {
	Source struct {
		selector
		FieldPath string `json:"fieldPath,omitempty"`
	} `json:"source"`
	Targets []struct {
		Select     selector   `json:"select"`
		Reject     []selector `json:"reject,omitempty"`
		FieldPaths []string   `json:"fieldPaths"`
		Options    *struct {
			Delimiter string `json:"delimiter,omitempty"`
			Index     int    `json:"index,omitempty"`
			Create    bool   `json:"create,omitempty"`
		} `json:"options,omitempty"`
	} `json:"targets"`
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
	"Secret":                   {"v1", true, func() any { return &corev1.Secret{} }},
	"ConfigMap":                {"v1", true, func() any { return &corev1.ConfigMap{} }},
	"PodDisruptionBudget":      {"policy/v1", true, func() any { return &policyv1.PodDisruptionBudget{} }},
	"NetworkPolicy":            {"networking.k8s.io/v1", true, func() any { return &networkingv1.NetworkPolicy{} }},
	"MutatingWebhookConfiguration": {"admissionregistration.k8s.io/v1", false, func() any {
		return &admissionregistrationv1.MutatingWebhookConfiguration{}
	}},
	"ValidatingWebhookConfiguration": {"admissionregistration.k8s.io/v1", false, func() any {
		return &admissionregistrationv1.ValidatingWebhookConfiguration{}
	}},
}

// certManagerKinds are the cert-manager objects of the cert-manager overlay,
// which this module has no Go types for; all are namespaced.
var certManagerKinds = map[string]string{
	"Issuer":      "cert-manager.io/v1",
	"Certificate": "cert-manager.io/v1",
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
			continue
		}
		// Overlays add only cert-manager objects, in the system namespace.
		if want, ok := certManagerKinds[d.kind()]; !ok {
			t.Errorf("%s: kind %s is not expected in an overlay", d, d.kind())
		} else if d.apiVersion() != want || d.namespace() != systemNamespace {
			t.Errorf("%s: apiVersion %s in namespace %q, want %s in %q", d, d.apiVersion(), d.namespace(), want, systemNamespace)
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
	for _, dir := range []string{
		"manifests/base", "manifests/base/crds", "manifests/base/rbac", "manifests/base/manager", "manifests/base/webhook",
		"manifests/overlays/standalone", "manifests/overlays/cert-manager", "manifests/overlays/local",
	} {
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
		for i, p := range k.Patches {
			switch {
			case (p.Path == "") == (p.Patch == ""):
				t.Errorf("%s/kustomization.yaml: patch %d needs exactly one of path and patch", dir, i)
			case p.Path != "":
				if _, err := os.Stat(filepath.Join(repoRoot, dir, p.Path)); err != nil {
					t.Errorf("%s/kustomization.yaml: patch %d: %v", dir, i, err)
				}
				listed[filepath.Clean(p.Path)] = true
			}
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
		"kubeflow.org_mpijobs.yaml",
		"kubeflow.org_pytorchjobs.yaml",
		"kubeflow.org_xgboostjobs.yaml",
		"trainer.kubeflow.org_clustertrainingruntimes.yaml",
		"trainer.kubeflow.org_optimizationjobs.yaml",
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
	// The cert-manager overlay builds on either.
	cm := all["manifests/overlays/cert-manager"]
	if !slices.Contains(cm.Resources, "../standalone") && !slices.Contains(cm.Resources, "../../base") {
		t.Errorf("manifests/overlays/cert-manager: resources %q include neither ../standalone nor ../../base", cm.Resources)
	}
	// The generated webhook configurations are part of the base.
	if !slices.Contains(all["manifests/base/webhook"].Resources, "manifests.yaml") {
		t.Errorf("manifests/base/webhook/kustomization.yaml does not list the generated manifests.yaml")
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
	prereq.Require(t, err == nil, "kubectl not found in bin/k8s or on PATH (run `make k8s-tools`); skipping the kustomize build")
	return p
}

// rendered caches the output of `kubectl kustomize` per directory.
var rendered sync.Map // directory -> func() ([]doc, error)

// render renders a kustomization directory (relative to the repository root)
// with `kubectl kustomize`; no cluster is needed.
func render(t *testing.T, dir string) []doc {
	t.Helper()
	kc := kubectl(t)
	f, _ := rendered.LoadOrStore(dir, sync.OnceValues(func() ([]doc, error) {
		cmd := exec.Command(kc, "kustomize", dir)
		cmd.Dir = repoRoot
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("kubectl kustomize %s: %w\n%s", dir, err, stderr.String())
		}
		return decodeDocs(dir, bytes.NewReader(out))
	}))
	docs, err := f.(func() ([]doc, error))()
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

// findIn returns the single document of the given kind and name in docs.
func findIn(t *testing.T, docs []doc, kind, name string) doc {
	t.Helper()
	return tree{docs: docs}.find(t, kind, name)
}

// renamed maps the objects under manifests/base whose names the
// kustomizations change to their rendered names.
var renamed = map[string]string{
	"MutatingWebhookConfiguration/" + generatedMutatingName:     "MutatingWebhookConfiguration/" + mutatingWebhookName,
	"ValidatingWebhookConfiguration/" + generatedValidatingName: "ValidatingWebhookConfiguration/" + validatingWebhookName,
}

// checkRendered checks that rendered objects decode strictly into their API
// types, and that namespaced ones are in the system namespace. It returns
// their kind/name keys.
func checkRendered(t *testing.T, docs []doc) map[string]bool {
	t.Helper()
	got := map[string]bool{}
	for _, d := range docs {
		got[d.kind()+"/"+d.name()] = true
		if _, ok := certManagerKinds[d.kind()]; ok {
			if d.namespace() != systemNamespace {
				t.Errorf("%s: namespace %q, want %q", d, d.namespace(), systemNamespace)
			}
			continue
		}
		ty, ok := typed[d.kind()]
		if !ok {
			t.Errorf("unexpected kind in output: %s", d)
			continue
		}
		if err := yaml.UnmarshalStrict(d.json, ty.new()); err != nil {
			t.Errorf("%s: does not decode strictly into %s: %v", d, d.kind(), err)
		}
		if ty.namespaced && d.namespace() != systemNamespace && !sdkCopy(d) {
			t.Errorf("%s: namespace %q, want %q", d, d.namespace(), systemNamespace)
		}
	}
	return got
}

// TestKustomizeBuild renders the base and the standalone overlay with
// `kubectl kustomize` (no cluster needed) and checks that they hold exactly
// the objects of the files under manifests/base, as renamed by the
// kustomizations. The cert-manager overlay has its own test in
// webhook_test.go.
func TestKustomizeBuild(t *testing.T) {
	tr := base(t)
	want := map[string]bool{}
	for _, d := range tr.docs {
		key := d.kind() + "/" + d.name()
		if to, ok := renamed[key]; ok {
			key = to
		}
		want[key] = true
	}
	// The standalone overlay adds the public ConfigMap's copy where the
	// Kubeflow SDK looks by default.
	sdk, _, err := loadTree("manifests/kubeflow-system")
	if err != nil {
		t.Fatal(err)
	}
	withSDK := maps.Clone(want)
	for _, d := range sdk {
		withSDK[d.kind()+"/"+d.name()] = true
	}
	for dir, want := range map[string]map[string]bool{"manifests/base": want, "manifests/overlays/standalone": withSDK} {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			docs := render(t, dir)
			got := checkRendered(t, docs)
			dep := decodeInto[appsv1.Deployment](t, findIn(t, docs, "Deployment", managerName))
			if img := dep.Spec.Template.Spec.Containers[0].Image; !strings.HasPrefix(img, managerImage+":") && !strings.HasPrefix(img, managerImage+"@") {
				t.Errorf("manager image %q, want %s with a tag or digest", img, managerImage)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("objects rendered from %s differ from the files under manifests/base (-files +rendered):\n%s", dir, diff)
			}
		})
	}
}

// TestLocalOverlay renders manifests/overlays/local, for a manager that runs
// outside the cluster: the base without the Deployment, the Services, the
// webhooks (which would point at a Service without pods and, failing closed,
// block every TrainJob) and what only the in-cluster webhooks need.
func TestLocalOverlay(t *testing.T) {
	docs := render(t, "manifests/overlays/local")
	got := checkRendered(t, docs)
	removed := map[string]bool{
		"Deployment/" + managerName:                               true,
		"PodDisruptionBudget/" + managerName:                      true,
		"NetworkPolicy/" + managerName:                            true,
		"Service/" + metricsService:                               true,
		"Service/" + webhookService:                               true,
		"Secret/" + webhookSecret:                                 true,
		"MutatingWebhookConfiguration/" + mutatingWebhookName:     true,
		"ValidatingWebhookConfiguration/" + validatingWebhookName: true,
		"Role/" + certRotationRole:                                true,
		"RoleBinding/" + certRotationRole:                         true,
		"ClusterRole/" + certRotationRole:                         true,
		"ClusterRoleBinding/" + certRotationRole:                  true,
	}
	want := map[string]bool{}
	base := render(t, "manifests/base")
	for _, d := range base {
		if key := d.kind() + "/" + d.name(); !removed[key] {
			want[key] = true
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("objects of the local overlay (-base without the in-cluster manager +rendered):\n%s", diff)
	}
	// What is left is unchanged.
	for _, d := range docs {
		b := findIn(t, base, d.kind(), d.name())
		if diff := cmp.Diff(b.obj, d.obj); diff != "" {
			t.Errorf("%s differs from manifests/base (-base +local):\n%s", d, diff)
		}
	}
}
