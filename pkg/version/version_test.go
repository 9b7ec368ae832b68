package version

import (
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestResolve(t *testing.T) {
	stamp := func(version string, settings ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/trainyard/trainyard", Version: version}}
		for i := 0; i+1 < len(settings); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return bi
	}
	cases := []struct {
		name   string
		linked Info
		bi     *debug.BuildInfo
		want   Info
	}{
		{
			name:   "the linker's values win over the stamp",
			linked: Info{Version: "v0.1.0-3-g1a2b3c4", GitCommit: "1a2b3c4d", BuildDate: "2026-01-02T03:04:05Z", GoVersion: "go1.26.1"},
			bi:     stamp("v0.0.0-20260101000000-ffffffffffff", "vcs.revision", "ffffffff", "vcs.modified", "true"),
			want:   Info{Version: "v0.1.0-3-g1a2b3c4", GitCommit: "1a2b3c4d", BuildDate: "2026-01-02T03:04:05Z", GoVersion: "go1.26.1"},
		},
		{
			name:   "plain go build in a modified checkout: the go command's version and commit",
			linked: Info{GoVersion: "go1.26.1"},
			bi:     stamp("v0.0.0-20260101000000-1a2b3c4d5e6f+dirty", "vcs.revision", "1a2b3c4d5e6f", "vcs.modified", "true", "vcs.time", "2026-01-01T00:00:00Z"),
			want:   Info{Version: "v0.0.0-20260101000000-1a2b3c4d5e6f+dirty", GitCommit: "1a2b3c4d5e6f-dirty", GoVersion: "go1.26.1"},
		},
		{
			name:   "no stamp (a test binary, -buildvcs=false): dev",
			linked: Info{GoVersion: "go1.26.1"},
			bi:     stamp("(devel)"),
			want:   Info{Version: Dev, GoVersion: "go1.26.1"},
		},
		{
			name:   "no build info at all",
			linked: Info{GitCommit: "abc", GoVersion: "go1.26.1"},
			want:   Info{Version: Dev, GitCommit: "abc", GoVersion: "go1.26.1"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, resolve(tc.linked, tc.bi)); diff != "" {
				t.Errorf("resolve (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGet(t *testing.T) {
	// A test binary is built without -X and without a VCS stamp.
	got := Get()
	if got.Version == "" || got.GoVersion == "" {
		t.Errorf("Get() = %+v: want a version and a Go version", got)
	}
}

func TestInfoString(t *testing.T) {
	cases := []struct {
		info Info
		want string
	}{
		{Info{Version: "v0.1.0", GitCommit: "1a2b3c4", BuildDate: "2026-01-02T03:04:05Z", GoVersion: "go1.26.1"},
			"v0.1.0 (commit 1a2b3c4, built 2026-01-02T03:04:05Z, go1.26.1)"},
		{Info{Version: Dev, GoVersion: "go1.26.1"}, "dev (go1.26.1)"},
	}
	for _, tc := range cases {
		if got := tc.info.String(); got != tc.want {
			t.Errorf("%+v.String() = %q, want %q", tc.info, got, tc.want)
		}
	}
}

func TestConfigMap(t *testing.T) {
	cm := ConfigMap("trainyard-system", "v0.1.0")
	if cm.Name != "kubeflow-trainer-public" || cm.Namespace != "trainyard-system" {
		t.Errorf("ConfigMap %s/%s, want trainyard-system/kubeflow-trainer-public", cm.Namespace, cm.Name)
	}
	want := map[string]string{"kubeflow_trainer_version": KubeflowTrainerVersion, "trainyard_version": "v0.1.0"}
	if diff := cmp.Diff(want, cm.Data); diff != "" {
		t.Errorf("data (-want +got):\n%s", diff)
	}
}
