package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/trainyard/trainyard/pkg/localcluster"
)

// What make run builds is what its cluster runs: the guide needs no Kueue,
// kwok or kubectl; -kueue, -keep and -containers add theirs.
func TestRunTools(t *testing.T) {
	repo, err := localcluster.FindRepoDir(".")
	if err != nil {
		t.Fatal(err)
	}
	base := []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "jobset-controller"}
	cases := map[string]struct {
		f    runFlags
		want []string
	}{
		"the guide":   {want: base},
		"-quick":      {f: runFlags{quick: true}, want: base},
		"-kueue":      {f: runFlags{kueue: true}, want: append(base, "kueue-controller")},
		"-keep":       {f: runFlags{keep: true}, want: append(base, "kubectl")},
		"-containers": {f: runFlags{containers: true}, want: append(base, "kubelet", "kube-proxy", "coredns", "provisioner")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := runTools(repo, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("runTools (-want +got):\n%s", diff)
			}
		})
	}
}
