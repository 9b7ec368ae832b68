package manifests

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// testPaths lists, in the non-test Go files under root's cmd and pkg trees,
// every import of a package under test/ and every string literal that names
// a path under test/ (a literal "test" or "test/..."; `filepath.Join(repo,
// "test", "tools", ...)` is one): "<file>: <literal>", relative to root.
func testPaths(t *testing.T, root string) []string {
	t.Helper()
	var found []string
	fset := token.NewFileSet()
	for _, tree := range []string{"cmd", "pkg"} {
		err := filepath.WalkDir(filepath.Join(root, tree), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					return true
				}
				if s == "test" || strings.HasPrefix(s, "test/") || strings.HasPrefix(s, "github.com/trainyard/trainyard/test/") {
					found = append(found, filepath.ToSlash(rel)+": "+s)
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatalf("reading %s: %v", tree, err)
		}
	}
	slices.Sort(found)
	return found
}

// TestProductReadsNothingUnderTest: what Trainyard ships (cmd/, pkg/) never
// imports a package under test/ nor names a path there: tests and their
// tools live under test/, and a product that ran them would break where only
// the product is installed (trainyard-local carries its scripts; the local
// cluster finds CRDs and manifests from the binaries it runs).
func TestProductReadsNothingUnderTest(t *testing.T) {
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	if found := testPaths(t, root); len(found) > 0 {
		t.Errorf("product code naming test/:\n%s", strings.Join(found, "\n"))
	}
}

// TestTestPathsFindsThem proves the check above can fail.
func TestTestPathsFindsThem(t *testing.T) {
	root := t.TempDir()
	write := func(path, src string) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, path), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("cmd/a/main.go", "package main\n\nimport \"path/filepath\"\n\nvar p = filepath.Join(\"repo\", \"test\", \"tools\", \"build.sh\")\n")
	write("pkg/b/b.go", "package b\n\nimport _ \"github.com/trainyard/trainyard/test/util/rtt\"\n\nconst s = \"test/tools/x.sh\"\n")
	write("pkg/b/b_test.go", "package b\n\nconst t = \"test/ok\"\n")
	want := []string{"cmd/a/main.go: test", "pkg/b/b.go: github.com/trainyard/trainyard/test/util/rtt", "pkg/b/b.go: test/tools/x.sh"}
	if diff := cmp.Diff(want, testPaths(t, root)); diff != "" {
		t.Errorf("testPaths (-want +got):\n%s", diff)
	}
}
