package localcluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Volcano's binaries are needed (and built) only by clusters that run it.
func TestBinariesOfVolcano(t *testing.T) {
	for _, gang := range []string{"", GangSchedulerVolcano} {
		o := Options{RepoDir: t.TempDir(), GangScheduler: gang}
		bins, err := Binaries(o)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, b := range bins {
			if n := filepath.Base(b); n == VolcanoScheduler || n == VolcanoControllers {
				got = append(got, n)
			}
		}
		var want []string
		if gang == GangSchedulerVolcano {
			want = []string{VolcanoScheduler, VolcanoControllers}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("GangScheduler %q: Volcano binaries (-want +got):\n%s", gang, diff)
		}
	}
}

// The CRDs and the scheduler configuration come from the module Volcano's
// binaries are built from (here: test/tools/volcano's, without building them).
func TestPrepareVolcano(t *testing.T) {
	repo, err := FindRepoDir(".")
	if err != nil {
		t.Fatal(err)
	}
	list := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "volcano.sh/volcano")
	list.Dir = filepath.Join(repo, "test", "tools", "volcano")
	list.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	out, err := list.Output()
	if err != nil {
		t.Fatalf("the volcano.sh/volcano module of test/tools/volcano: %v", err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		download := exec.Command("go", "mod", "download", "volcano.sh/volcano")
		download.Dir = list.Dir
		if b, err := download.CombinedOutput(); err != nil {
			t.Fatalf("go mod download volcano.sh/volcano: %v\n%s", err, b)
		}
		if out, err = list.Output(); err != nil {
			t.Fatal(err)
		}
		dir = strings.TrimSpace(string(out))
	}
	state := t.TempDir()
	for _, d := range []string{"manifests", "config"} {
		if err := os.Mkdir(filepath.Join(state, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c := &Cluster{o: Options{RepoDir: repo, StateDir: state}}
	if err := c.prepareVolcanoFrom(dir); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, crd := range c.crds {
		names = append(names, crd.GetName())
	}
	for _, want := range []string{"podgroups.scheduling.volcano.sh", "queues.scheduling.volcano.sh", "commands.bus.volcano.sh"} {
		if !slices.Contains(names, want) {
			t.Errorf("CRDs %v: %s missing", names, want)
		}
	}
	conf, err := os.ReadFile(c.volcanoConf())
	if err != nil {
		t.Fatal(err)
	}
	if string(conf) != volcanoSchedulerConf {
		t.Errorf("scheduler configuration:\n%s\nwant:\n%s", conf, volcanoSchedulerConf)
	}
}

func TestEqualResources(t *testing.T) {
	rl := func(kv ...string) corev1.ResourceList {
		out := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return out
	}
	for name, tc := range map[string]struct {
		a, b corev1.ResourceList
		want bool
	}{
		"same":                    {rl("cpu", "32", "memory", "256Gi"), rl("cpu", "32", "memory", "256Gi"), true},
		"same amount, other form": {rl("cpu", "32000m"), rl("cpu", "32"), true},
		"kwok's default":          {rl("cpu", "1k", "memory", "1Ti"), rl("cpu", "32", "memory", "256Gi"), false},
		"missing":                 {rl("cpu", "32"), rl("cpu", "32", "memory", "256Gi"), false},
		"extra":                   {rl("cpu", "32", "pods", "110"), rl("cpu", "32"), false},
		"empty":                   {nil, rl("cpu", "32"), false},
	} {
		if got := equalResources(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: equalResources = %v, want %v", name, got, tc.want)
		}
	}
}
