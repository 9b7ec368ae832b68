package localcluster

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestModuleVersion: a module's version comes from a binary's build
// information, its main module or a dependency, a replacement's when
// replaced (a directory as it is); none for a module the binary lacks or
// built from a checkout.
func TestModuleVersion(t *testing.T) {
	bi := &debug.BuildInfo{
		Main: debug.Module{Path: "sigs.k8s.io/kwok", Version: "v0.8.0"},
		Deps: []*debug.Module{
			{Path: "sigs.k8s.io/jobset", Version: "v0.12.0"},
			{Path: "sigs.k8s.io/kueue", Version: "v0.17.1", Replace: &debug.Module{Path: "example.com/kueue-fork", Version: "v0.17.2"}},
			{Path: "volcano.sh/volcano", Version: "v1.10.0", Replace: &debug.Module{Path: "/src/volcano"}},
		},
	}
	type got struct{ Path, Version, Dir string }
	cases := map[string]got{
		"sigs.k8s.io/kwok":   {"sigs.k8s.io/kwok", "v0.8.0", ""},
		"sigs.k8s.io/jobset": {"sigs.k8s.io/jobset", "v0.12.0", ""},
		"sigs.k8s.io/kueue":  {"example.com/kueue-fork", "v0.17.2", ""},
		"volcano.sh/volcano": {"", "", "/src/volcano"},
		"example.com/none":   {},
	}
	for mod, want := range cases {
		p, v, d := moduleVersion(bi, mod)
		if diff := cmp.Diff(want, got{p, v, d}); diff != "" {
			t.Errorf("%s (-want +got):\n%s", mod, diff)
		}
	}
	if _, v, _ := moduleVersion(&debug.BuildInfo{Main: debug.Module{Path: "m", Version: "(devel)"}}, "m"); v != "" {
		t.Errorf("a module built from a checkout has version %q, want none", v)
	}
}

// TestDownloadModule: the module cache's directory of a module at a version
// (one this module requires, so that it is in the cache).
func TestDownloadModule(t *testing.T) {
	gomod, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*sigs\.k8s\.io/yaml (v\S+)`).FindSubmatch(gomod)
	if m == nil {
		t.Fatal("go.mod requires no sigs.k8s.io/yaml")
	}
	dir, err := downloadModule(context.Background(), "sigs.k8s.io/yaml", string(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Errorf("downloadModule = %s: %v", dir, err)
	}
}
