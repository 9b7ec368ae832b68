package processnode

import (
	"os"
	"regexp"
	"testing"
)

// The node's kubelet version is the Kubernetes release of the k8s.io/api in
// go.mod, so a go.mod upgrade must move it along.
func TestKubernetesReleaseFollowsGoMod(t *testing.T) {
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*k8s\.io/api v0\.(\d+\.\d+)\s*$`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod requires no k8s.io/api v0.X.Y")
	}
	if want := "v1." + string(m[1]); KubernetesRelease != want {
		t.Errorf("KubernetesRelease = %s, want %s (k8s.io/api v0.%s in go.mod)", KubernetesRelease, want, m[1])
	}
}
