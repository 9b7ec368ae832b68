package e2eutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Build builds the repository's ./cmd/<name> into out, static (CGO_ENABLED=0)
// as the images build it, so that the binary runs on any node.
func Build(repo, name, out string) error {
	cmd := exec.Command("go", "build", "-o", out, "./cmd/"+name)
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/%s: %w\n%s", name, err, b)
	}
	return nil
}

// BuildTemp builds ./cmd/<name> into a temporary directory of t and returns
// the binary's path; it fails t if the build does.
func BuildTemp(t testing.TB, repo, name string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	if err := Build(repo, name, bin); err != nil {
		t.Fatal(err)
	}
	return bin
}
