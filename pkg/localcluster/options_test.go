package localcluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Binaries lists what a cluster runs and nothing else: kwok only for kwok
// nodes, Kueue unless NoKueue, never kubectl (manifests are rendered in
// process). make run builds exactly this list (trainyard-local run -tools).
func TestBinariesFollowTheOptions(t *testing.T) {
	base := Options{RepoDir: "/repo", BinDir: "/bin/k8s", ManagerBinary: "/bin/manager", ProcessNodeBinary: "/bin/node"}
	controlPlane := []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "jobset-controller"}
	cases := map[string]struct {
		o    Options
		want []string
	}{
		"defaults: kwok nodes and Kueue": {o: Options{}, want: append(controlPlane, "kwok", "kueue-controller", "manager")},
		"make run: a process node, no Kueue": {o: Options{ProcessNodes: 1, NoKueue: true},
			want: append(controlPlane, "manager", "node")},
		"a process node with Kueue": {o: Options{ProcessNodes: 1}, want: append(controlPlane, "kueue-controller", "manager", "node")},
		"kwok nodes asked for beside it": {o: Options{ProcessNodes: 1, CPUNodes: 1, NoKueue: true},
			want: append(controlPlane, "kwok", "manager", "node")},
		"container nodes, no manager": {o: Options{ContainerNodes: 2, NoKueue: true, ExternalManager: true},
			want: append(controlPlane, "kubelet", "kube-proxy", "coredns", "provisioner")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := tc.o
			o.RepoDir, o.BinDir, o.ManagerBinary, o.ProcessNodeBinary = base.RepoDir, base.BinDir, base.ManagerBinary, base.ProcessNodeBinary
			o.Runtimes = []string{}
			bins, err := Binaries(o)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, b := range bins {
				got = append(got, filepath.Base(b))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Binaries (-want +got):\n%s", diff)
			}
		})
	}
}

// Kustomize renders as kubectl kustomize does: resources, a JSON patch with a
// target, a name prefix.
func TestKustomize(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"kustomization.yaml": `namePrefix: p-
resources: [cm.yaml]
patches:
- target: {kind: ConfigMap, name: cm}
  patch: |-
    - op: add
      path: /data/b
      value: "2"
`,
		"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {a: \"1\"}\n",
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := Kustomize(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := "apiVersion: v1\ndata:\n  a: \"1\"\n  b: \"2\"\nkind: ConfigMap\nmetadata:\n  name: p-cm\n"
	if diff := cmp.Diff(want, string(out)); diff != "" {
		t.Errorf("Kustomize (-want +got):\n%s", diff)
	}
	if _, err := Kustomize(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("Kustomize of a missing directory: %v, want an error that names it", err)
	}
}
