package processnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/trainyard/trainyard/pkg/processnode/gpus"
	"github.com/trainyard/trainyard/test/prereq"
)

// fakeNvidiaSMI writes a script that prints out and exits with code, and
// returns its path.
func fakeNvidiaSMI(t *testing.T, out string, code int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "nvidia-smi")
	script := "#!/bin/sh\n/bin/cat <<'END'\n" + out + "END\nexit " + strconv.Itoa(code) + "\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDiscoverGPUs(t *testing.T) {
	two := "0, GPU-aaa, NVIDIA H200, 143771 MiB\n1, GPU-bbb, NVIDIA H200, 143771 MiB\n"
	cases := map[string]struct {
		path    func(t *testing.T) string
		want    []gpus.GPU
		wantErr string // a part of it
		wantLog string // a part of it
	}{
		"a path given": {
			path:    func(t *testing.T) string { return fakeNvidiaSMI(t, two, 0) },
			want:    []gpus.GPU{{Index: 0, UUID: "GPU-aaa", Name: "NVIDIA H200", MemoryMiB: 143771}, {Index: 1, UUID: "GPU-bbb", Name: "NVIDIA H200", MemoryMiB: 143771}},
			wantLog: "2 found",
		},
		"a path given that fails": {
			path:    func(t *testing.T) string { return fakeNvidiaSMI(t, "No devices were found\n", 6) },
			wantErr: "No devices were found",
		},
		"a path given that prints nonsense": {
			path:    func(t *testing.T) string { return fakeNvidiaSMI(t, "hello\n", 0) },
			wantErr: `"hello"`,
		},
		"a path given that is not there": {
			path:    func(t *testing.T) string { return filepath.Join(t.TempDir(), "nvidia-smi") },
			wantErr: "no such file",
		},
		"discovery off": {
			path:    func(*testing.T) string { return NoNvidiaSMI },
			wantLog: "discovery off",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var log strings.Builder
			got, err := discoverGPUs(context.Background(), tc.path(t), func(f string, a ...interface{}) { fmt.Fprintf(&log, f, a...) })
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error %v, want one with %q", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("GPUs (-want +got):\n%s", diff)
			}
			if !strings.Contains(log.String(), tc.wantLog) {
				t.Errorf("log %q, want %q in it", log.String(), tc.wantLog)
			}
		})
	}
}

// Without a path, nvidia-smi is looked for on PATH; none there means no GPUs.
func TestDiscoverGPUsOnPath(t *testing.T) {
	smi := fakeNvidiaSMI(t, "0, GPU-aaa, NVIDIA H200, 143771 MiB\n", 0)
	t.Setenv("PATH", filepath.Dir(smi))
	got, err := discoverGPUs(context.Background(), "", func(string, ...interface{}) {})
	if err != nil || len(got) != 1 || got[0].UUID != "GPU-aaa" {
		t.Errorf("with nvidia-smi on PATH: %v, %v; want GPU-aaa", got, err)
	}
	if executable(DefaultNvidiaSMI) == nil {
		prereq.Optional(t, DefaultNvidiaSMI+" exists on this machine: the fallback to it cannot be tested here")
	}
	t.Setenv("PATH", t.TempDir())
	var log strings.Builder
	got, err = discoverGPUs(context.Background(), "", func(f string, a ...interface{}) { fmt.Fprintf(&log, f, a...) })
	if err != nil || got != nil {
		t.Errorf("without nvidia-smi: %v, %v; want no GPUs and no error", got, err)
	}
	if !strings.Contains(log.String(), "no nvidia-smi") {
		t.Errorf("log %q does not say there is no nvidia-smi", log.String())
	}
}
