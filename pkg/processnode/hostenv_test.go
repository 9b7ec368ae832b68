package processnode

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestDetectHostQuirks(t *testing.T) {
	quirk := []corev1.EnvVar{{Name: "PET_REDIRECTS", Value: "1"}, {Name: "PET_TEE", Value: "1"}}
	cases := map[string]struct {
		torch  string // version.py's content; "" for no torch
		python string // what python3 links to; "" for none
		want   []corev1.EnvVar
	}{
		"Debian bookworm: torch 1.13 on 3.11": {torch: "__version__ = '1.13.0a0+git7c98e70'\ndebug = False\n", python: "python3.11", want: quirk},
		"torch 1 on a later Python":           {torch: `__version__ = "1.12.1"`, python: "python3.12", want: quirk},
		"torch 1.13 on 3.10 works":            {torch: "__version__ = '1.13.1'", python: "python3.10"},
		"torch 2 is not affected":             {torch: "__version__ = '2.1.2+cpu'", python: "python3.11"},
		"no torch":                            {python: "python3.11"},
		"no python":                           {torch: "__version__ = '1.13.0'"},
		"unreadable version":                  {torch: "version = 'x'", python: "python3.11"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			paths := HostPaths{Python: filepath.Join(dir, "python3"), TorchVersion: filepath.Join(dir, "torch", "version.py")}
			if tc.torch != "" {
				if err := os.MkdirAll(filepath.Dir(paths.TorchVersion), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(paths.TorchVersion, []byte(tc.torch), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if tc.python != "" {
				if err := os.WriteFile(filepath.Join(dir, tc.python), nil, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(tc.python, paths.Python); err != nil {
					t.Fatal(err)
				}
			}
			var got []corev1.EnvVar
			for _, q := range DetectHostQuirks(paths) {
				if q.Why == "" {
					t.Errorf("quirk without a reason: %+v", q)
				}
				got = append(got, q.Env...)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseEnvDefaults(t *testing.T) {
	got, err := ParseEnvDefaults([]string{"A=1", "B=", "C=x=y"})
	if err != nil {
		t.Fatal(err)
	}
	want := []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B"}, {Name: "C", Value: "x=y"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, bad := range []string{"A", "=1", "A B=1"} {
		if _, err := ParseEnvDefaults([]string{bad}); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestContainerEnvNodeDefaults: the node's defaults come after PATH and
// HOSTNAME and before the container's variables, which win and may refer to them.
func TestContainerEnvNodeDefaults(t *testing.T) {
	ref := PodRef{Pod: testPod(), DefaultEnv: []corev1.EnvVar{{Name: "PET_TEE", Value: "1"}, {Name: "PET_REDIRECTS", Value: "1"}}}
	c := &corev1.Container{Env: []corev1.EnvVar{{Name: "PET_TEE", Value: "2"}, {Name: "SEEN", Value: "$(PET_REDIRECTS)"}}}
	got, err := ContainerEnv(ref, c, fakeSources{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"PATH=" + DefaultPath, "HOSTNAME=job-node-0-1", "PET_TEE=2", "PET_REDIRECTS=1", "SEEN=1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
