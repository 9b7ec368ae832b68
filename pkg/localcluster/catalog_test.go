package localcluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUserRBACFilesAreTheBase: every file the local cluster installs for the
// users is one the kustomize base installs, so the local cluster grants what a
// real install does.
func TestUserRBACFilesAreTheBase(t *testing.T) {
	repo, err := FindRepoDir(".")
	if err != nil {
		t.Fatal(err)
	}
	kust, err := os.ReadFile(filepath.Join(repo, "manifests", "base", "rbac", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range UserRBACFiles {
		if !strings.Contains(string(kust), "\n- "+f+"\n") {
			t.Errorf("%s is not a resource of manifests/base/rbac", f)
		}
		if _, err := os.Stat(filepath.Join(repo, "manifests", "base", "rbac", f)); err != nil {
			t.Error(err)
		}
	}
}

func TestLocalRuntimes(t *testing.T) {
	repo, err := FindRepoDir(".")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := LocalRuntimes(repo)
	if err != nil {
		t.Fatal(err)
	}
	has := map[string]bool{}
	for _, r := range rs {
		if _, err := os.Stat(r); err != nil {
			t.Error(err)
		}
		rel, _ := filepath.Rel(repo, r)
		has[rel] = true
	}
	for _, want := range []string{"runtimes/torch-distributed.yaml", "runtimes/mpi-distributed.yaml", FashionMNISTRuntimeFile} {
		if !has[want] {
			t.Errorf("LocalRuntimes lacks %s: %v", want, rs)
		}
	}
}
