// Package version is the identity of a Trainyard build (its release, commit and
// build date) and where a cluster publishes the version of its Trainyard: the
// ConfigMap that Kubeflow's SDK reads (configmap.go).
//
// Release builds set the variables with the linker, as the Makefile and the
// Dockerfile do:
//
//	go build -ldflags "-X github.com/trainyard/trainyard/pkg/version.Version=v0.1.0 \
//	    -X github.com/trainyard/trainyard/pkg/version.GitCommit=$(git rev-parse HEAD) \
//	    -X github.com/trainyard/trainyard/pkg/version.BuildDate=2026-01-02T03:04:05Z"
//
// A plain `go build` or `go install` sets none of them; Get then falls back on
// what the go command stamps into every binary (runtime/debug.ReadBuildInfo):
// the module version (a tag, or a pseudo-version of the commit with +dirty) and
// the commit. The stamp has no build date (its vcs.time is the commit's).
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Set by the linker (-X); empty in builds that do not set them.
var (
	// Version is the release: `git describe --tags --always --dirty` in the
	// Makefile, e.g. v0.1.0, v0.1.0-3-g1a2b3c4 or 1a2b3c4-dirty.
	Version string
	// GitCommit is the full commit hash the binary was built from.
	GitCommit string
	// BuildDate is RFC 3339 in UTC: the Makefile takes the last commit's time
	// (SOURCE_DATE_EPOCH), so that rebuilding an unchanged tree gives the same
	// binary; an image build passes the time of the build.
	BuildDate string
)

// Dev is the version of a build that says nothing about its origin (no -X,
// no version control stamp: e.g. a test binary).
const Dev = "dev"

// Info is a build's identity.
type Info struct {
	Version   string `json:"version"`
	GitCommit string `json:"gitCommit,omitempty"`
	BuildDate string `json:"buildDate,omitempty"`
	GoVersion string `json:"goVersion"`
}

// String is one line for humans, e.g.
// "v0.1.0 (commit 1a2b3c4d5e6f, built 2026-01-02T03:04:05Z, go1.26.1)".
func (i Info) String() string {
	var parts []string
	if i.GitCommit != "" {
		parts = append(parts, "commit "+i.GitCommit)
	}
	if i.BuildDate != "" {
		parts = append(parts, "built "+i.BuildDate)
	}
	parts = append(parts, i.GoVersion)
	return fmt.Sprintf("%s (%s)", i.Version, strings.Join(parts, ", "))
}

// Get returns this binary's identity: the linker's values, else the go
// command's stamp (no build date), else Dev.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return resolve(Info{Version: Version, GitCommit: GitCommit, BuildDate: BuildDate, GoVersion: runtime.Version()}, bi)
}

// resolve fills what the linker left empty from the build info (nil when the
// binary has none).
func resolve(linked Info, bi *debug.BuildInfo) Info {
	out := linked
	if bi == nil {
		bi = &debug.BuildInfo{}
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if out.Version == "" {
		// "(devel)" is what the go command records when it knows no version
		// (no VCS stamp, e.g. -buildvcs=false or a test binary).
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			out.Version = v
		} else {
			out.Version = Dev
		}
	}
	if out.GitCommit == "" {
		out.GitCommit = settings["vcs.revision"]
		if out.GitCommit != "" && settings["vcs.modified"] == "true" {
			out.GitCommit += "-dirty"
		}
	}
	return out
}
