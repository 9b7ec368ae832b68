package localcluster

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The gang scheduler's binaries are needed only with the option.
func TestGangSchedulerBinaries(t *testing.T) {
	base := Options{RepoDir: "/repo", BinDir: "/bin/k8s", ManagerBinary: "/bin/manager"}
	plain := []string{"/bin/k8s/etcd", "/bin/k8s/kube-apiserver", "/bin/k8s/kube-controller-manager",
		"/bin/k8s/kube-scheduler", "/bin/k8s/jobset-controller", "/bin/k8s/kwok",
		"/bin/k8s/kueue-controller", "/bin/manager"}
	cases := map[string]struct {
		gang string
		want []string
	}{
		"none": {want: plain},
		"coscheduling": {gang: GangSchedulerCoscheduling, want: append(plain[:len(plain):len(plain)],
			"/bin/k8s/scheduler-plugins-scheduler", "/bin/k8s/scheduler-plugins-controller")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := base
			o.GangScheduler = tc.gang
			got, err := Binaries(o)
			if err != nil {
				t.Fatal(err)
			}
			for i := range got {
				got[i] = filepath.ToSlash(got[i])
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Binaries (-want +got):\n%s", diff)
			}
		})
	}
}
