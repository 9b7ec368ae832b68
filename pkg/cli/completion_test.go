package cli

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// TestDynamicCompletion asks cobra's __complete, as the shells' scripts do,
// for the names of the namespace's jobs and runtimes.
func TestDynamicCompletion(t *testing.T) {
	f := newFakeCluster(t, append(catalog(),
		trainJob("alpha", trainer.TrainJobStatus{Phase: "Running"}), trainJob("beta", trainer.TrainJobStatus{Phase: "Complete"}),
		pyTorchJob("mnist", 1))...)
	// The namespace completion lists from the clientset, which holds only pods.
	if _, err := f.cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string // the completions, then the directive
	}{
		{[]string{"get", ""}, "alpha\tTrainJob Running\nbeta\tTrainJob Complete\n:4\n"},
		{[]string{"logs", "a"}, "alpha\tTrainJob Running\n:4\n"},
		{[]string{"wait", "pytorchjob/"}, "pytorchjob/mnist\tPyTorchJob\n:4\n"},
		{[]string{"get", "--kind", "pytorchjob", ""}, "mnist\tPyTorchJob\n:4\n"},
		{[]string{"delete", "alpha", "b"}, "beta\tTrainJob Complete\n:4\n"}, // several names
		{[]string{"events", "alpha", ""}, ":4\n"},                           // one name
		{[]string{"-n", "other", "get", ""}, ":4\n"},                        // another namespace's
		{[]string{"runtimes", "torch-"}, "torch-distributed\tClusterTrainingRuntime, torch\ntorch-gpu\tClusterTrainingRuntime, torch\n:4\n"},
		{[]string{"train", "--runtime", "m"}, "mine\tTrainingRuntime, plainml\n:4\n"},
		{[]string{"get", "-o", ""}, "yaml\njson\n:4\n"},
		{[]string{"wait", "x", "--for", "Running,S"}, "Running,Succeeded\nRunning,Suspended\n:6\n"},
		{[]string{"get", "-n", ""}, "ns\n:4\n"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := f.run(append([]string{"__complete"}, tc.args...)...)
			if code != ExitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if diff := cmp.Diff(tc.want, out); diff != "" {
				t.Errorf("completions (-want +got):\n%s", diff)
			}
		})
	}
}
