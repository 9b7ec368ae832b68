package v1kinds

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/cli"
	"github.com/trainyard/trainyard/test/integration/framework"
)

// TestCLI drives an MPIJob and an XGBoostJob with the trainyard CLI, as a
// user would, against the real API server and their controllers: get
// (one, and the list), wait (for Running, then Succeeded) and delete, with
// mpijob/NAME and xgboostjob/NAME. (Logs need a kubelet: the process node
// e2e reads them.)
func TestCLI(t *testing.T) {
	ns := framework.NewNamespace(t, c, "cli")
	kubeconfig, err := env.KubeConfig()
	require.NoError(t, err)
	kcFile := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kcFile, kubeconfig, 0o600))
	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := cli.Main(context.Background(), append([]string{"--kubeconfig", kcFile, "-n", ns}, args...), &out, &errOut)
		return code, out.String(), errOut.String()
	}

	mpi := &kubeflowv1.MPIJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pi"}, Spec: kubeflowv1.MPIJobSpec{
		MPIReplicaSpecs: map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{
			"Launcher": replica(1, "mpi-launcher", "mpirun", "/pi"), "Worker": replica(2, "mpi-worker")}}}
	require.NoError(t, c.Create(ctx(), mpi))
	js := waitJobSet(t, ns, "pi")
	runPod(t, js, "launcher-0", corev1.PodRunning)
	runPod(t, js, "worker-1", corev1.PodRunning)

	code, out, errOut := run("wait", "mpijob/pi", "--for", "Running", "--timeout", "30s", "--interval", "100ms")
	require.Equal(t, cli.ExitOK, code, "wait --for Running: %s%s", out, errOut)
	require.Contains(t, out, "MPIJob pi: Running")
	code, out, errOut = run("get", "mpijob/pi")
	require.Equal(t, cli.ExitOK, code, errOut)
	for _, want := range []string{"Kind:      MPIJob\n", "Replicas:  Launcher 1, Worker 2\n", "Status:    Running\n",
		"Step: launcher-0, Status: Running", "Step: worker-1, Status: Running"} {
		require.Contains(t, out, want)
	}
	code, out, _ = run("get", "--kind", "mpijob")
	require.Equal(t, cli.ExitOK, code)
	require.Regexp(t, `(?m)^pi\s+Launcher 1, Worker 2\s+Running\s+MPIJobRunning\s+`, out)

	finishJobSet(t, js, "Completed")
	code, out, errOut = run("wait", "mpijob/pi", "--timeout", "30s", "--interval", "100ms")
	require.Equal(t, cli.ExitOK, code, "wait: %s%s", out, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Contains(t, lines[len(lines)-1], "MPIJob pi: Succeeded (MPIJobSucceeded: MPIJob pi is successfully completed.)")
	code, out, errOut = run("delete", "mpijob/pi")
	require.Equal(t, cli.ExitOK, code, errOut)
	require.Equal(t, "mpijob pi deleted\n", out)

	xgb := &kubeflowv1.XGBoostJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "iris"}, Spec: kubeflowv1.XGBoostJobSpec{
		RunPolicy:       kubeflowv1.RunPolicy{BackoffLimit: ptr.To[int32](0)},
		XGBReplicaSpecs: map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{"Master": replica(1, "xgboost"), "Worker": replica(1, "xgboost")}}}
	require.NoError(t, c.Create(ctx(), xgb))
	xjs := waitJobSet(t, ns, "iris")
	finishJobSet(t, xjs, "Failed")
	code, out, _ = run("wait", "xgboostjob/iris", "--timeout", "30s", "--interval", "100ms")
	require.Equal(t, cli.ExitFailed, code, "wait for a failed job: %s", out)
	require.Contains(t, out, "XGBoostJob iris: Failed (XGBoostJobFailed")
	code, out, errOut = run("get", "xgboostjob/iris", "-o", "json")
	require.Equal(t, cli.ExitOK, code, errOut)
	require.Contains(t, out, `"kind": "XGBoostJob"`)
	code, _, errOut = run("delete", "xgboostjob/iris")
	require.Equal(t, cli.ExitOK, code, errOut)
	eventually(t, func() error {
		err := c.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "iris"}, &kubeflowv1.XGBoostJob{})
		if err == nil {
			return fmt.Errorf("XGBoostJob iris is still there")
		}
		return client.IgnoreNotFound(err)
	})
}
