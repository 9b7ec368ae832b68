package plugins_test

import (
	"errors"
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	rtt "github.com/trainyard/trainyard/test/util/rtt"
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

// pluginImporters lists the packages under root's cmd and pkg trees, plugin
// packages and their registration list (this package) apart, whose non-test
// files import a plugin package ("<package> imports <plugin>", paths
// relative to root).
func pluginImporters(t *testing.T, root string) []string {
	t.Helper()
	var found []string
	for _, tree := range []string{"cmd", "pkg"} {
		err := filepath.WalkDir(filepath.Join(root, tree), func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return err
			}
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			rel = filepath.ToSlash(rel)
			if rel == "pkg/runtime/plugins" || strings.HasPrefix(rel, "pkg/runtime/plugins/") {
				return nil // the plugins and the registration list
			}
			pkg, err := build.ImportDir(path, 0)
			if errors.As(err, new(*build.NoGoError)) {
				return nil
			}
			if err != nil {
				return err
			}
			for _, imp := range pkg.Imports {
				if plugin, ok := strings.CutPrefix(imp, pluginsPath+"/"); ok {
					found = append(found, rel+" imports "+plugin)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("reading the packages under %s: %v", tree, err)
		}
	}
	slices.Sort(found)
	return found
}

// TestOnlyKnownPackagesImportPlugins: outside tests, a plugin is reached
// through the pipeline that the registration list (pkg/runtime/plugins)
// builds, and what the rest of the code shares with plugins lives in
// pkg/runtime. The packages below are the known exceptions; a new one fails
// here (move what it needs into pkg/runtime, or say here why it cannot), and
// so does an exception that went away.
func TestOnlyKnownPackagesImportPlugins(t *testing.T) {
	want := []string{
		// The TrainJob kind parses --kueue-mode into the kueue plugin's mode.
		"pkg/controller/trainjob imports kueue",
		// The local cluster (make cluster-up, the tests' clusters) turns on
		// Kueue's integrations for the manager's --kueue-mode.
		"pkg/localcluster imports kueue",
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, pluginImporters(t, rtt.RepoRoot())); diff != "" {
		t.Errorf("packages importing plugin packages (-known +found):\n%s", diff)
	}
}

// TestPluginImportersFindsOne proves the check above can fail: a package
// outside the plugins importing one is reported, the registration list and
// the plugins themselves are not.
func TestPluginImportersFindsOne(t *testing.T) {
	root := t.TempDir()
	write := func(dir, src string) {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, dir, "x.go"), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("pkg/validation", "package validation\n\nimport _ \""+pluginsPath+"/volcano\"\n")
	write("pkg/runtime/plugins", "package plugins\n\nimport _ \""+pluginsPath+"/volcano\"\n")
	write("pkg/runtime/plugins/mpi", "package mpi\n\nimport _ \""+pluginsPath+"/volcano\"\n")
	write("cmd/tool", "package main\n\nimport _ \"github.com/trainyard/trainyard/pkg/runtime\"\n")
	if diff := cmp.Diff([]string{"pkg/validation imports volcano"}, pluginImporters(t, root)); diff != "" {
		t.Errorf("pluginImporters (-want +got):\n%s", diff)
	}
}
