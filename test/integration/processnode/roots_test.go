package processnode

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The agent of this suite sets these in every container (Config.DefaultEnv).
var nodeDefaultEnv = []corev1.EnvVar{
	{Name: "TRAINYARD_IT_NODE_DEFAULT", Value: "from-node"},
	{Name: "TRAINYARD_IT_OVERRIDDEN", Value: "from-node"},
}

func hostRootEntries(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir("/")
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestContainerRootsArePrivate: two pods running at once, with no workingDir,
// write ./data and a script by relative path (as the Kubeflow SDK's command and
// the PyTorch guide's ./data do). Each sees only its own files, in a directory
// of its own; the host's / is unchanged and the directories go with the pods.
// The node's default environment reaches both, below the container's own.
func TestContainerRootsArePrivate(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	const ns = "roots"
	createNamespace(t, ctx, ns)
	before := hostRootEntries(t)
	script := `set -e
mkdir -p data && echo "$POD" > data/owner
printf 'print("script of %s")\n' "$POD" > script.py
sleep 2   # both pods have written by now
echo "pwd-is-root=$( [ "$(pwd)" != / ] && echo no || echo yes )"
echo "entries=$(ls | tr '\n' ' ')"
echo "owner=$(cat data/owner)"
python3 script.py
echo "host-data=$( [ -e /data/owner ] && echo yes || echo no ) host-script=$( [ -e /script.py ] && echo yes || echo no )"
echo "default=$TRAINYARD_IT_NODE_DEFAULT overridden=$TRAINYARD_IT_OVERRIDDEN"`
	names := []string{"root-a", "root-b"}
	for _, name := range names {
		pod := shPod(ns, name, script, corev1.RestartPolicyNever)
		pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "POD", Value: name}, {Name: "TRAINYARD_IT_OVERRIDDEN", Value: "from-pod"}}
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	uids := map[string]string{}
	for _, name := range names {
		p := waitPod(t, ctx, ns, name, "finished", finished)
		logs := kubeletLogs(t, ns, name, "c", "")
		if p.Status.Phase != corev1.PodSucceeded {
			t.Fatalf("%s: phase %s, status %+v\nlogs: %s", name, p.Status.Phase, p.Status, logs)
		}
		uids[name] = string(p.UID)
		want := fmt.Sprintf(`pwd-is-root=no
entries=data script.py 
owner=%[1]s
script of %[1]s
host-data=no host-script=no
default=from-node overridden=from-pod
`, name)
		if logs != want {
			t.Errorf("%s: logs:\n%s\nwant:\n%s", name, logs, want)
		}
		// The files are in the pod's directory on the host, while the pod exists.
		root := filepath.Join(agentStateDir, "pods", ns+"_"+name+"_"+string(p.UID), "roots", "c")
		if b, err := os.ReadFile(filepath.Join(root, "data", "owner")); err != nil || strings.TrimSpace(string(b)) != name {
			t.Errorf("%s: %s/data/owner: %q, %v", name, root, b, err)
		}
	}
	if after := hostRootEntries(t); !slices.Equal(before, after) {
		t.Errorf("the host's / changed: before %v, after %v", before, after)
	}
	for _, name := range names {
		if err := cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range names {
		dir := filepath.Join(agentStateDir, "pods", ns+"_"+name+"_"+uids[name])
		for ctx.Err() == nil {
			if _, err := os.Stat(dir); os.IsNotExist(err) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s: %s still exists after the pod was deleted (%v)", name, dir, err)
		}
	}
}
