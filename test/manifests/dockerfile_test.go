package manifests

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/trainyard/trainyard/test/prereq"
)

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
	if diff := cmp.Diff([]string{"golang:1.26", "gcr.io/distroless/static:nonroot", "gcr.io/distroless/static:nonroot"}, from); diff != "" {
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
	prereq.Require(t, err == nil, "go not on PATH")
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
