package processnode

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// A process node runs the host's programs, not an image's, so what the host's
// software needs to run the pods an upstream runtime describes is the node's
// business: it sets it as a default in every container's environment
// (Config.DefaultEnv), below the container's own variables, so that a user's
// value wins and runtimes stay as they are upstream.

// HostQuirk is one thing the host's software needs, detected on the host.
type HostQuirk struct {
	// Why says what was found and what the variables fix, for the agent's log.
	Why string
	Env []corev1.EnvVar
}

// HostPaths are where DetectHostQuirks looks; DefaultHostPaths are Debian's.
type HostPaths struct {
	// Python is the system interpreter the pods run as python3 (a symlink to
	// pythonX.Y on Debian).
	Python string
	// TorchVersion is the version.py of the system interpreter's torch.
	TorchVersion string
}

// DefaultHostPaths are the paths of Debian's python3 and python3-torch.
var DefaultHostPaths = HostPaths{
	Python:       "/usr/bin/python3",
	TorchVersion: "/usr/lib/python3/dist-packages/torch/version.py",
}

// DetectHostQuirks lists what the host's software needs in every container.
// It reads files only (importing torch takes seconds).
//
// Known: torch 1.x's torchrun on Python >= 3.11 (Debian bookworm's python3-torch
// 1.13) crashes at worker start with "'NoneType' object has no attribute 'get'"
// unless --redirects and --tee are given a non-zero value: its parser iterates
// over an IntFlag, which no longer yields the zero member from Python 3.11 on,
// so the defaults "0" map to None. torch >= 2.0 is not affected.
// PET_REDIRECTS=1 PET_TEE=1 writes each rank's stdout to its log and tees it
// to the console, prefixed [default<local rank>]:.
func DetectHostQuirks(p HostPaths) []HostQuirk {
	var out []HostQuirk
	torch := readTorchVersion(p.TorchVersion)
	py := pythonVersion(p.Python)
	if torch.major == 1 && (py.major > 3 || py.major == 3 && py.minor >= 11) {
		out = append(out, HostQuirk{
			Why: fmt.Sprintf("torch %s on Python %d.%d: torchrun's --redirects/--tee defaults fail there", torch.raw, py.major, py.minor),
			Env: []corev1.EnvVar{{Name: "PET_REDIRECTS", Value: "1"}, {Name: "PET_TEE", Value: "1"}},
		})
	}
	return out
}

type version struct {
	raw          string
	major, minor int
}

var torchVersionRE = regexp.MustCompile(`(?m)^__version__\s*=\s*['"]((\d+)\.(\d+)[^'"]*)['"]`)

func readTorchVersion(path string) version {
	b, err := os.ReadFile(path)
	if err != nil {
		return version{}
	}
	m := torchVersionRE.FindSubmatch(b)
	if m == nil {
		return version{}
	}
	major, _ := strconv.Atoi(string(m[2]))
	minor, _ := strconv.Atoi(string(m[3]))
	return version{raw: string(m[1]), major: major, minor: minor}
}

var pythonNameRE = regexp.MustCompile(`^python(\d+)\.(\d+)$`)

// pythonVersion reads the interpreter's version from the name its symlink
// chain ends at (python3 -> python3.11), without running it.
func pythonVersion(path string) version {
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil {
		return version{}
	}
	m := pythonNameRE.FindStringSubmatch(filepath.Base(resolved))
	if m == nil {
		return version{}
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	return version{raw: m[1] + "." + m[2], major: major, minor: minor}
}

// ParseEnvDefaults parses NAME=VALUE pairs (a node's --default-env flags).
func ParseEnvDefaults(pairs []string) ([]corev1.EnvVar, error) {
	var out []corev1.EnvVar
	for _, p := range pairs {
		name, value, ok := strings.Cut(p, "=")
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			return nil, fmt.Errorf("default env %q: want NAME=VALUE", p)
		}
		out = append(out, corev1.EnvVar{Name: name, Value: value})
	}
	return out, nil
}

func envPairs(env []corev1.EnvVar) string {
	parts := make([]string, 0, len(env))
	for _, e := range env {
		parts = append(parts, e.Name+"="+e.Value)
	}
	return strings.Join(parts, " ")
}
