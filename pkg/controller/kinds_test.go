package controller

import (
	"errors"
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// modulePath is the import path of the module's root.
const modulePath = "github.com/trainyard/trainyard"

// listPackage is this package: the one list of kinds.
const listPackage = modulePath + "/pkg/controller"

// kindAPIs are API packages only kinds use (the kubeflow.org/v1 kinds'): a
// package that branches on such a kind imports them. (The trainer.kubeflow.org
// API is also the runtimes' and the plugins' vocabulary, so it is not among
// them.)
const kindAPIs = modulePath + "/apis/kubeflow/"

// kindPackages are the packages of the kinds of the one list.
func kindPackages(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, k := range Kinds() {
		ty := reflect.TypeOf(k)
		for ty.Kind() == reflect.Pointer {
			ty = ty.Elem()
		}
		out = append(out, ty.PkgPath())
	}
	return out
}

// kindImporters lists the packages under root's cmd and pkg trees whose
// non-test files import a kind package, the list (listPackage) and the kind
// package itself apart, or an API only kinds use (kindAPIs), the kind
// packages and their libraries apart ("<package> imports <package>", paths
// relative to the module). A kinds' library is code several kinds share
// (say, what the kubeflow.org/v1 kinds have in common): a package that only
// kinds and other such libraries import; it may import a kind's API, never
// a kind.
func kindImporters(t *testing.T, root string, kinds []string) []string {
	t.Helper()
	imports := map[string][]string{} // package -> its imports
	for _, tree := range []string{"cmd", "pkg"} {
		err := filepath.WalkDir(filepath.Join(root, tree), func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return err
			}
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			importPath := modulePath + "/" + filepath.ToSlash(rel)
			if importPath == listPackage {
				return nil
			}
			pkg, err := build.ImportDir(path, 0)
			if errors.As(err, new(*build.NoGoError)) {
				return nil
			}
			if err != nil {
				return err
			}
			imports[importPath] = pkg.Imports
			return nil
		})
		if err != nil {
			t.Fatalf("reading the packages under %s: %v", tree, err)
		}
	}
	libraries := kindLibraries(imports, kinds)
	var found []string
	for p, imps := range imports {
		for _, imp := range imps {
			if (slices.Contains(kinds, imp) && imp != p) || (strings.HasPrefix(imp, kindAPIs) && !slices.Contains(kinds, p) && !libraries[p]) {
				found = append(found, strings.TrimPrefix(p, modulePath+"/")+" imports "+strings.TrimPrefix(imp, modulePath+"/"))
			}
		}
	}
	slices.Sort(found)
	return found
}

// kindLibraries are the packages, kinds apart, that some package imports
// and that only kinds and other kinds' libraries import.
func kindLibraries(imports map[string][]string, kinds []string) map[string]bool {
	importers := map[string][]string{}
	for p, imps := range imports {
		for _, imp := range imps {
			importers[imp] = append(importers[imp], p)
		}
	}
	libraries := map[string]bool{}
	for p := range imports {
		if !slices.Contains(kinds, p) && len(importers[p]) > 0 {
			libraries[p] = true
		}
	}
	for changed := true; changed; {
		changed = false
		for p := range libraries {
			for _, by := range importers[p] {
				if !slices.Contains(kinds, by) && !libraries[by] {
					delete(libraries, p)
					changed = true
					break
				}
			}
		}
	}
	return libraries
}

// TestOnlyTheListImportsKinds: a kind is one package plus one line in
// Kinds. Everything else reaches a kind only through that list and the
// interfaces its kinds implement (jobframework.Kind, view.Kind): the
// manager's command, the CLI, the webhooks, metrics and framework packages
// import no kind package, nor the API of a kubeflow.org/v1 kind, and no kind
// imports another. A package that does fails here; move what it needs
// behind an interface, or into the kind.
func TestOnlyTheListImportsKinds(t *testing.T) {
	kinds := kindPackages(t)
	if len(kinds) < 2 {
		t.Fatalf("kind packages %v: want every kind's", kinds)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if bad := kindImporters(t, root, kinds); len(bad) > 0 {
		t.Errorf("packages importing a kind package outside the list of kinds (pkg/controller):\n%s", strings.Join(bad, "\n"))
	}
}

// TestKindImportersFindsOne proves the check above can fail: a shared
// package and a kind importing a kind, and a shared package importing a
// kind's API, are reported (also when kinds import it too); the list, a
// kind's own files, a kind importing its API and a library of kinds
// importing it are not.
func TestKindImportersFindsOne(t *testing.T) {
	root := t.TempDir()
	write := func(dir, src string) {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, dir, "x.go"), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	kind := modulePath + "/pkg/controller/a"
	other := modulePath + "/pkg/controller/b"
	write("pkg/cli", "package cli\n\nimport _ \""+kind+"\"\n")
	write("pkg/webhooks", "package webhooks\n\nimport _ \""+kindAPIs+"v1\"\n")
	write("pkg/controller", "package controller\n\nimport _ \""+kind+"\"\n")
	write("pkg/controller/a", "package a\n\nimport (\n\t_ \""+kindAPIs+"v1\"\n\t_ \""+modulePath+"/pkg/controller/v1lib\"\n\t_ \""+modulePath+"/pkg/controller/v1util\"\n)\n")
	write("pkg/controller/b", "package b\n\nimport _ \""+kind+"\"\n")
	write("cmd/tool", "package main\n\nimport _ \"fmt\"\n")
	// a library of the kind a, and one the CLI uses too
	write("pkg/controller/v1lib", "package v1lib\n\nimport _ \""+kindAPIs+"v1\"\n")
	write("pkg/controller/v1util", "package v1util\n\nimport _ \""+kindAPIs+"v1\"\n")
	write("pkg/cli/more", "package cli\n\nimport _ \""+modulePath+"/pkg/controller/v1util\"\n")
	want := []string{
		"pkg/cli imports pkg/controller/a", "pkg/controller/b imports pkg/controller/a",
		"pkg/controller/v1util imports apis/kubeflow/v1", "pkg/webhooks imports apis/kubeflow/v1",
	}
	if diff := cmp.Diff(want, kindImporters(t, root, []string{kind, other})); diff != "" {
		t.Errorf("kindImporters (-want +got):\n%s", diff)
	}
}
