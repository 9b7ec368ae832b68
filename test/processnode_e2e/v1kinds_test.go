package processnode_e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/test/e2eutil"
	"github.com/trainyard/trainyard/test/prereq"
)

// createV1Example creates the kubeflow.org/v1 job of an example file under
// examples/v1, unchanged but for its namespace.
func createV1Example(t *testing.T, ctx context.Context, cl client.Client, ns, file string, job client.Object) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repo, "examples", "v1", file))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(raw, job); err != nil {
		t.Fatalf("decoding %s: %v", file, err)
	}
	job.SetNamespace(ns)
	if err := cl.Create(ctx, job); err != nil {
		t.Fatalf("creating %s: %v", file, err)
	}
}

// waitV1Finished waits until a v1 job is Succeeded or Failed and returns that
// condition, or fails the test after deadline.
func waitV1Finished(t *testing.T, ctx context.Context, cl client.Client, job client.Object, status *kubeflowv1.JobStatus, deadline time.Duration) kubeflowv1.JobCondition {
	t.Helper()
	end := time.Now().Add(deadline)
	for {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil && ctx.Err() == nil {
			t.Logf("reading %s: %v", job.GetName(), err)
		}
		for _, c := range status.Conditions {
			if (c.Type == kubeflowv1.JobSucceeded || c.Type == kubeflowv1.JobFailed) && c.Status == corev1.ConditionTrue {
				return c
			}
		}
		if time.Now().After(end) || ctx.Err() != nil {
			t.Fatalf("%s not finished after %s; status %+v", job.GetName(), deadline, status)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestMPIJobAllreduce runs examples/v1/mpijob/allreduce.yaml: the launcher's
// mpirun starts one rank on each of the 2 workers through kubexec.sh (SSH
// with the job's key) and the hostfile Trainyard wrote, and mpi4py
// allreduces across them; the MPIJob succeeds with its launcher.
func TestMPIJobAllreduce(t *testing.T) {
	for _, p := range []string{"/usr/sbin/sshd", "/usr/bin/mpirun", "/usr/bin/ssh", "/usr/bin/ssh-keygen"} {
		_, err := os.Stat(p)
		prereq.Requiref(t, err == nil, "%s missing (install Debian's openssh-server and openmpi-bin, as `make debian-packages` does)", p)
	}
	prereq.Require(t, exec.Command("/usr/bin/python3", "-c", "import mpi4py").Run() == nil,
		"/usr/bin/python3 cannot import mpi4py (install Debian's python3-mpi4py, as `make debian-packages` does)")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cl := pytorchJobClient(t)
	const ns = "mpijob-e2e"
	createNamespace(t, ctx, ns)
	follow := followPods(ctx, ns, kubeflowv1.JobNameLabel+"=allreduce,"+kubeflowv1.ReplicaTypeLabel+"=launcher", "mpi-launcher", replicaLog.replica)
	job := &kubeflowv1.MPIJob{}
	start := time.Now()
	createV1Example(t, ctx, cl, ns, "mpijob/allreduce.yaml", job)
	cond := waitV1Finished(t, ctx, cl, job, &job.Status, 3*time.Minute)
	logs := follow.wait(t, ctx)
	t.Logf("MPIJob allreduce: %s/%s after %s", cond.Type, cond.Reason, time.Since(start).Round(100*time.Millisecond))
	launcher := logs["launcher-0"].log
	if cond.Type != kubeflowv1.JobSucceeded || cond.Reason != "MPIJobSucceeded" {
		t.Fatalf("MPIJob: %s/%s (%s), want Succeeded/MPIJobSucceeded; launcher log:\n%s", cond.Type, cond.Reason, cond.Message, launcher)
	}
	results, err := e2eutil.MPIResults(launcher)
	if err != nil {
		t.Fatal(err)
	}
	for rank := range 2 {
		r, ok := results[rank]
		if want := "allreduce-worker-" + string(rune('0'+rank)); !ok || r.Size != 2 || r.Sum != 3 || r.Host != want {
			t.Errorf("rank %d: %+v (printed: %t), want size 2, sum 3 on %s; launcher log:\n%s", rank, r, ok, want, launcher)
		}
	}
	if rs := job.Status.ReplicaStatuses[kubeflowv1.MPIJobReplicaTypeLauncher]; rs == nil || rs.Succeeded != 1 {
		t.Errorf("launcher replica status %+v, want 1 succeeded", rs)
	}
}

var xgbV1ResultRE = regexp.MustCompile(`XGBOOST_RESULT rank=(\d+) world_size=(\d+) train_rows=(\d+) first_logloss=([0-9.]+) final_logloss=([0-9.]+) accuracy=([0-9.]+)`)

// TestXGBoostJob trains examples/v1/xgboostjob on its Master and Worker from
// v1's environment (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK): one Rabit
// ring, one model (the same final metric on both), a falling loss.
func TestXGBoostJob(t *testing.T) {
	prereq.Require(t, exec.Command("/usr/bin/python3", "-c", "import xgboost, sklearn").Run() == nil,
		"/usr/bin/python3 cannot import xgboost and sklearn (Debian's python3-xgboost, python3-sklearn): run `make debian-packages`")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl := pytorchJobClient(t)
	const ns = "xgboostjob-e2e"
	createNamespace(t, ctx, ns)
	script, err := os.ReadFile(filepath.Join(repo, "examples", "v1", "xgboostjob", "train.py"))
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "xgboost-v1-script", Namespace: ns}, Data: map[string]string{"train.py": string(script)}}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	follow := followPods(ctx, ns, kubeflowv1.JobNameLabel+"=xgboost-dist", "xgboost", replicaLog.replica)
	job := &kubeflowv1.XGBoostJob{}
	createV1Example(t, ctx, cl, ns, "xgboostjob/xgboostjob.yaml", job)
	cond := waitV1Finished(t, ctx, cl, job, &job.Status, 4*time.Minute)
	logs := follow.wait(t, ctx)
	if cond.Type != kubeflowv1.JobSucceeded || cond.Reason != "XGBoostJobSucceeded" {
		t.Fatalf("XGBoostJob: %s/%s (%s); logs: %+v", cond.Type, cond.Reason, cond.Message, logs)
	}
	finals := map[string]string{}
	for replica, rank := range map[string]string{"master-0": "0", "worker-0": "1"} {
		l := logs[replica].log
		want := "env MASTER_ADDR=xgboost-dist-master-0 MASTER_PORT=9991 WORLD_SIZE=2 RANK=" + rank + " WORKER_ADDRS=xgboost-dist-worker-0"
		if !regexp.MustCompile(regexp.QuoteMeta(want)).MatchString(l) {
			t.Errorf("%s: no %q in its log:\n%s", replica, want, l)
		}
		m := xgbV1ResultRE.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("%s: no XGBOOST_RESULT line:\n%s", replica, l)
			continue
		}
		t.Logf("%s: rank %s of %s, %s rows, logloss %s -> %s, accuracy %s", replica, m[1], m[2], m[3], m[4], m[5], m[6])
		if m[1] != rank || m[2] != "2" {
			t.Errorf("%s trained as rank %s of %s, want %s of 2", replica, m[1], m[2], rank)
		}
		first, _ := strconv.ParseFloat(m[4], 64)
		final, _ := strconv.ParseFloat(m[5], 64)
		if !(final < first) {
			t.Errorf("%s: logloss did not fall: %s -> %s", replica, m[4], m[5])
		}
		finals[replica] = m[5] + " " + m[6]
	}
	if len(finals) == 2 && finals["master-0"] != finals["worker-0"] {
		t.Errorf("master and worker disagree on the final metric (not one model): %q", finals)
	}
}
