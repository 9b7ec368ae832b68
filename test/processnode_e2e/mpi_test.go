package processnode_e2e

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/test/e2eutil"
	"github.com/trainyard/trainyard/test/prereq"
)

// TestMPIAllreduce runs a 2-node TrainJob on runtimes/mpi-distributed.yaml: the
// node pods run Debian's sshd in their own network namespaces, the launcher
// runs mpirun with the hostfile and the SSH keys Trainyard made, and mpi4py
// allreduces across the ranks, one per node pod.
func TestMPIAllreduce(t *testing.T) {
	for _, p := range []string{"/usr/sbin/sshd", "/usr/bin/mpirun", "/usr/bin/ssh", "/usr/bin/ssh-keygen"} {
		_, err := os.Stat(p)
		prereq.Requiref(t, err == nil, "%s missing (install Debian's openssh-server and openmpi-bin, as `make debian-packages` does)", p)
	}
	prereq.Require(t, exec.Command("/usr/bin/python3", "-c", "import mpi4py").Run() == nil,
		"/usr/bin/python3 cannot import mpi4py (install Debian's python3-mpi4py, as `make debian-packages` does)")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const ns, name = "mpi-e2e", "allreduce"
	createNamespace(t, ctx, ns)
	job := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: "mpi-distributed"},
			Trainer: &trainer.Trainer{
				NumNodes: ptr.To[int32](2),
				Command:  []string{"mpirun", "/usr/bin/python3", "-c", e2eutil.MPIAllreduce},
			},
		},
	}
	start := time.Now()
	if err := c.Client().Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	cond := waitFinished(t, ctx, ns, name)
	t.Logf("TrainJob %s: %s/%s after %s", name, cond.Type, cond.Reason, time.Since(start).Round(100*time.Millisecond))

	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "jobset.sigs.k8s.io/replicatedjob-name=launcher"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 {
		t.Fatalf("%d launcher pods, want 1", len(pods.Items))
	}
	raw, err := cs.CoreV1().Pods(ns).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{Container: "node"}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("launcher logs: %v", err)
	}
	logs := string(raw)
	if cond.Type != trainer.TrainJobComplete {
		t.Fatalf("TrainJob %s: %s (%s), want Complete; launcher logs:\n%s", name, cond.Type, cond.Message, logs)
	}
	results, err := e2eutil.MPIResults(logs)
	if err != nil {
		t.Fatal(err)
	}
	hosts := map[string]bool{}
	for rank := range 2 {
		r, ok := results[rank]
		if !ok || r.Size != 2 || r.Sum != 3 {
			t.Errorf("rank %d: %+v (printed: %t), want size 2, sum 3; the launcher's logs:\n%s", rank, r, ok, logs)
			continue
		}
		t.Logf("launcher: rank %d on %s", rank, r.Host)
		hosts[r.Host] = true
	}
	// One rank per node pod: the hostfile gives each node one slot.
	for _, want := range []string{name + "-node-0-0", name + "-node-0-1"} {
		if !hosts[want] {
			t.Errorf("no rank ran on %s (ranks ran on %v)", want, hosts)
		}
	}

	var got trainer.TrainJob
	if err := c.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &got); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range got.Status.JobsStatus {
		names = append(names, s.Name)
	}
	if strings.Join(names, ",") != "node,launcher" {
		t.Errorf("jobsStatus names %v, want [node launcher]", names)
	}
	for _, s := range got.Status.JobsStatus {
		if s.Name == "launcher" && ptr.Deref(s.Succeeded, 0) != 1 {
			t.Errorf("launcher jobsStatus %+v, want 1 succeeded", s)
		}
	}
}
