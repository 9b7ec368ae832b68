// Package binaries checks what every Trainyard binary has in common: --version
// prints the identity the linker stamped (pkg/version), and the Makefile and
// the Dockerfile stamp it into each binary they build.
package binaries

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/trainyard/trainyard/pkg/version"
)

// repoRoot is the repository root, relative to this package (go test runs in
// the package directory).
const repoRoot = "../.."

// binaries are the commands with --version (version.RegisterFlag; the
// trainyard CLI's is cobra's), by the package go builds them from, with the
// name the Makefile gives each.
var binaries = []struct{ pkg, name string }{
	{"./cmd/trainyard", "trainyard"},
	{"./cmd/trainyard-manager", "trainyard-manager"},
	{"./cmd/trainyard-node", "trainyard-node"},
	{"./cmd/trainyard-initializer", "trainyard-initializer"},
	{"./cmd/trainyard-local", "trainyard-local"},
}

// versionPkg is the import path of pkg/version, which the linker's -X names.
var versionPkg = reflect.TypeFor[version.Info]().PkgPath()

// TestVersionFlag builds each binary as a release build does, with the
// version, commit and date set by -X, and runs `<binary> --version`: it must
// print them, version first, and exit 0 without doing anything else (no
// cluster, no API server, no arguments needed).
func TestVersionFlag(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("building the binaries needs the go command: %v", err)
	}
	const (
		wantVersion = "v9.9.9-test"
		wantCommit  = "0123456789abcdef0123456789abcdef01234567"
		wantDate    = "2026-01-02T03:04:05Z"
	)
	ldflags := strings.Join([]string{
		"-X", versionPkg + ".Version=" + wantVersion,
		"-X", versionPkg + ".GitCommit=" + wantCommit,
		"-X", versionPkg + ".BuildDate=" + wantDate,
	}, " ")
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, b := range binaries {
		t.Run(b.name, func(t *testing.T) {
			bin := filepath.Join(dir, b.name)
			build := exec.CommandContext(ctx, goCmd, "build", "-ldflags", ldflags, "-o", bin, b.pkg)
			build.Dir = repoRoot
			build.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("go build %s: %v\n%s", b.pkg, err, out)
			}

			var stdout, stderr bytes.Buffer
			run := exec.CommandContext(ctx, bin, "--version")
			run.Dir = dir
			run.Stdout, run.Stderr = &stdout, &stderr
			if err := run.Run(); err != nil {
				t.Fatalf("%s --version: %v\nstdout: %s\nstderr: %s", b.name, err, stdout.String(), stderr.String())
			}
			got := strings.TrimSpace(stdout.String())
			want := wantVersion + " (commit " + wantCommit + ", built " + wantDate + ", "
			if !strings.HasPrefix(got, want) || strings.Contains(got, "\n") {
				t.Errorf("%s --version printed %q, want one line starting %q", b.name, got, want)
			}
		})
	}
}

// goBuild matches a go build command line and captures its flags and its
// packages: the last fields that are relative package paths.
var goBuild = regexp.MustCompile(`go build (.*?)((?: \./\S+)+)$`)

// TestBuildsStampVersion checks that every go build of the Makefile and the
// Dockerfile that makes one of the binaries passes the linker flags that set
// pkg/version, and that the Makefile's -X names the package's real path (a
// wrong one would be silently ignored by the linker).
func TestBuildsStampVersion(t *testing.T) {
	makefile := readJoined(t, "Makefile")
	if want := "VERSION_PKG := " + versionPkg; !strings.Contains(makefile, want) {
		t.Errorf("the Makefile lacks %q", want)
	}
	for _, want := range []string{".Version=$(VERSION)", ".GitCommit=$(GIT_COMMIT)", ".BuildDate=$(BUILD_DATE)"} {
		if !strings.Contains(makefile, "-X $(VERSION_PKG)"+want) {
			t.Errorf("the Makefile's LDFLAGS lack -X $(VERSION_PKG)%s", want)
		}
	}
	dockerfile := readJoined(t, "Dockerfile")
	for _, want := range []string{".Version=${VERSION}", ".GitCommit=${GIT_COMMIT}", ".BuildDate=${BUILD_DATE}"} {
		if !strings.Contains(dockerfile, "-X "+versionPkg+want) {
			t.Errorf("the Dockerfile's LDFLAGS lack -X %s%s", versionPkg, want)
		}
	}

	built := map[string]bool{}
	check := func(file, text, ldflags string) {
		for _, line := range strings.Split(text, "\n") {
			// A shell line may hold several commands (cmd && cmd).
			for _, cmd := range strings.Split(line, "&&") {
				m := goBuild.FindStringSubmatch(strings.TrimSpace(cmd))
				if m == nil {
					continue
				}
				for _, pkg := range strings.Fields(m[2]) {
					if !isBinary(pkg) {
						continue
					}
					built[pkg] = true
					if !strings.Contains(m[1], ldflags) {
						t.Errorf("%s builds %s without %s: %s", file, pkg, ldflags, strings.TrimSpace(cmd))
					}
				}
			}
		}
	}
	check("Makefile", makefile, `-ldflags="$(LDFLAGS)"`)
	check("Dockerfile", dockerfile, `-ldflags="${LDFLAGS}"`)
	for _, b := range binaries {
		if !built[b.pkg] {
			t.Errorf("neither the Makefile nor the Dockerfile builds %s", b.pkg)
		}
	}
}

func isBinary(pkg string) bool {
	for _, b := range binaries {
		if b.pkg == pkg {
			return true
		}
	}
	return false
}

// readJoined reads a file of the repository with its continuation lines
// (backslash, newline) joined, so that each command is one line.
func readJoined(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(b), "\\\n", " ")
}
