package plugins_test

import (
	"go/build"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// pluginsPath is the import path under which every plugin has its package.
const pluginsPath = "github.com/trainyard/trainyard/pkg/runtime/plugins"

// crossImports lists, for each plugin package under dir, the other plugin
// packages its non-test files import ("<plugin> imports <other>"). Plugins
// share values only through runtime.Info and helpers of pkg/runtime: a
// plugin importing another would make their order and their fields a hidden
// contract between the two.
func crossImports(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		pkg, err := build.ImportDir(filepath.Join(dir, e.Name()), 0)
		if err != nil {
			t.Fatalf("reading plugin package %s: %v", e.Name(), err)
		}
		for _, imp := range pkg.Imports {
			if other, ok := strings.CutPrefix(imp, pluginsPath+"/"); ok {
				bad = append(bad, e.Name()+" imports "+other)
			}
		}
	}
	slices.Sort(bad)
	return bad
}

func TestPluginsImportNoOtherPlugin(t *testing.T) {
	if bad := crossImports(t, "."); len(bad) > 0 {
		t.Errorf("plugin packages import other plugin packages; move what they share into pkg/runtime:\n%s", strings.Join(bad, "\n"))
	}
}

// TestCrossImportsFindsOne proves the check above can fail: a plugin
// importing another one is reported.
func TestCrossImportsFindsOne(t *testing.T) {
	dir := t.TempDir()
	write := func(pkg, src string) {
		if err := os.MkdirAll(filepath.Join(dir, pkg), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, pkg, pkg+".go"), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("a", "package a\n\nimport _ \""+pluginsPath+"/b\"\n")
	write("b", "package b\n\nimport _ \"github.com/trainyard/trainyard/pkg/runtime\"\n")
	if diff := cmp.Diff([]string{"a imports b"}, crossImports(t, dir)); diff != "" {
		t.Errorf("crossImports (-want +got):\n%s", diff)
	}
}
