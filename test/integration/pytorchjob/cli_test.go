package pytorchjob

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
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/cli"
)

// TestCLI follows Kubeflow's mnist example with the trainyard CLI as a user
// would, against the real API server and the PyTorchJob controller: get,
// wait (for Running, then for Succeeded by default) and delete, with
// pytorchjob/NAME. The example's replicas ask for a GPU each. (Logs need a
// kubelet; pkg/cli tests them against a fake clientset.)
func TestCLI(t *testing.T) {
	ns := newNamespace(t)
	name := applyExample(t, ns, "examples/pytorchjob/pytorch_job_mnist_gloo.yaml")[0]
	kubeconfig, err := env.KubeConfig()
	require.NoError(t, err)
	kcFile := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kcFile, kubeconfig, 0o600))
	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := cli.Main(context.Background(), append([]string{"--kubeconfig", kcFile, "-n", ns}, args...), &out, &errOut)
		return code, out.String(), errOut.String()
	}
	ref := "pytorchjob/" + name

	js := waitJobSet(t, ns, name)
	_, master := createPod(t, js, "master", 0)
	_, worker := createPod(t, js, "worker-0", 0)
	master(corev1.PodRunning)
	worker(corev1.PodRunning)
	code, out, errOut := run("wait", ref, "--for", "Running", "--timeout", "30s", "--interval", "100ms")
	require.Equal(t, cli.ExitOK, code, "wait --for Running: %s%s", out, errOut)
	require.Contains(t, out, "PyTorchJob "+name+": Running")

	code, out, errOut = run("get", ref)
	require.Equal(t, cli.ExitOK, code, errOut)
	for _, want := range []string{
		"Name:      " + name + "\n", "Kind:      PyTorchJob\n", "Replicas:  Master 1, Worker 1\n", "Status:    Running\n",
		"  Step: master-0, Status: Running, Devices: gpu x 1, Pod: " + name + "-master-0-0-abcde\n",
		"  Step: worker-0, Status: Running, Devices: gpu x 1, Pod: " + name + "-worker-0-0-0-abcde\n",
	} {
		require.Contains(t, out, want)
	}
	code, out, _ = run("get", "--kind", "pytorchjob")
	require.Equal(t, cli.ExitOK, code)
	require.Regexp(t, `(?m)^`+name+`\s+Master 1, Worker 1\s+Running\s+PyTorchJobRunning\s+`, out)

	master(corev1.PodSucceeded)
	setJobSetStatus(t, js, func(s *jobsetv1alpha2.JobSetStatus) {
		s.ReplicatedJobsStatus = []jobsetv1alpha2.ReplicatedJobStatus{{Name: "master", Succeeded: 1}, {Name: "worker-0", Active: 1}}
		s.Conditions = []metav1.Condition{jobSetCondition(jobsetv1alpha2.JobSetCompleted, "AllJobsCompleted", "jobset completed successfully")}
	})
	code, out, errOut = run("wait", ref, "--timeout", "30s", "--interval", "100ms")
	require.Equal(t, cli.ExitOK, code, "wait: %s%s", out, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Contains(t, lines[len(lines)-1], "PyTorchJob "+name+": Succeeded (PyTorchJobSucceeded: PyTorchJob "+name+" is successfully completed.)")

	code, out, errOut = run("delete", ref)
	require.Equal(t, cli.ExitOK, code, errOut)
	require.Equal(t, "pytorchjob "+name+" deleted\n", out)
	eventually(t, func() error {
		err := c.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, &kubeflowv1.PyTorchJob{})
		if err == nil {
			return fmt.Errorf("PyTorchJob %s is still there", name)
		}
		return client.IgnoreNotFound(err)
	})
}
