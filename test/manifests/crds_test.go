package manifests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// lastAppliedLimit is the size limit of an object's annotations, which a
// client-side `kubectl apply` fills with the object's compact JSON
// (kubectl.kubernetes.io/last-applied-configuration).
const lastAppliedLimit = 256 * 1024

// crdFiles are the generated CRDs of manifests/base/crds.
func crdFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, "manifests", "base", "crds", "*_*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in manifests/base/crds (%v)", err)
	}
	sort.Strings(files)
	return files
}

func loadCRD(t *testing.T, path string) (*apiextensionsv1.CustomResourceDefinition, []byte) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	js, err := json.Marshal(&crd)
	if err != nil {
		t.Fatal(err)
	}
	return &crd, js
}

// undocumented lists the fields under a schema that have no description.
func undocumented(s *apiextensionsv1.JSONSchemaProps, path string) []string {
	var out []string
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := s.Properties[n]
		child := path + "." + n
		if p.Description == "" {
			out = append(out, child)
		}
		out = append(out, undocumented(&p, child)...)
	}
	if s.Items != nil && s.Items.Schema != nil {
		out = append(out, undocumented(s.Items.Schema, path+"[]")...)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		out = append(out, undocumented(s.AdditionalProperties.Schema, path+"{}")...)
	}
	return out
}

// Every field of every CRD has a description, so that `kubectl explain` says
// what it is (controller-gen writes them from the Go comments, capped at 120
// characters; test/tools/crddesc adds those of embedded object metadata).
func TestCRDDescriptions(t *testing.T) {
	for _, f := range crdFiles(t) {
		crd, _ := loadCRD(t, f)
		for _, v := range crd.Spec.Versions {
			root := v.Schema.OpenAPIV3Schema
			for _, top := range []string{"spec", "status"} {
				p, ok := root.Properties[top]
				if !ok {
					continue
				}
				if p.Description == "" {
					t.Errorf("%s %s: .%s has no description", crd.Name, v.Name, top)
				}
				for _, u := range undocumented(&p, "."+top) {
					t.Errorf("%s %s: %s has no description", crd.Name, v.Name, u)
				}
			}
		}
	}
}

// The CRDs stay small enough for a client-side `kubectl apply` (server-side
// apply is still the documented way).
func TestCRDSizeFitsClientSideApply(t *testing.T) {
	for _, f := range crdFiles(t) {
		crd, js := loadCRD(t, f)
		if len(js) >= lastAppliedLimit {
			t.Errorf("%s: %d bytes of JSON, over the %d that client-side apply can keep", crd.Name, len(js), lastAppliedLimit)
		}
		t.Logf("%s: %d KiB as compact JSON", crd.Name, len(js)/1024)
	}
}
