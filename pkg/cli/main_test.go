package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/controller/trainjob"
)

// fakeCluster runs command lines against a fake API with these objects, in
// namespace "ns" unless -n says otherwise.
// Pods are also in the fake clientset that logs read (every log is "fake logs").
type fakeCluster struct {
	t  *testing.T
	c  client.Client
	cs *k8sfake.Clientset
}

func newFakeCluster(t *testing.T, objs ...client.Object) *fakeCluster {
	t.Helper()
	s, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	var pods []k8sruntime.Object
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			pods = append(pods, p.DeepCopy())
		}
	}
	return &fakeCluster{t: t, c: fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build(), cs: k8sfake.NewClientset(pods...)}
}

// run runs a command line and returns its exit code, stdout and stderr.
func (f *fakeCluster) run(args ...string) (int, string, string) {
	f.t.Helper()
	var out, errOut bytes.Buffer
	e := &env{stdout: &out, stderr: &errOut}
	e.connect = func() (*Clients, error) {
		ns := e.namespaceFlag()
		if ns == "" {
			ns = "ns"
		}
		return &Clients{Client: f.c, Clientset: f.cs, Namespace: ns}, nil
	}
	code := run(context.Background(), e, args)
	return code, out.String(), errOut.String()
}

func clusterRuntime(name, framework string, spec trainer.TrainingRuntimeSpec) *trainer.ClusterTrainingRuntime {
	rt := &trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
	if framework != "" {
		rt.Labels = map[string]string{trainer.FrameworkLabel: framework}
	}
	return rt
}

func torchPolicy(nodes int32) *trainer.MLPolicy {
	return &trainer.MLPolicy{NumNodes: ptr.To(nodes), MLPolicySource: trainer.MLPolicySource{Torch: &trainer.TorchMLPolicySource{}}}
}

func catalog() []client.Object {
	return []client.Object{
		clusterRuntime("torch-distributed", "torch", runtimeSpec(torchPolicy(1), corev1.ResourceRequirements{})),
		clusterRuntime("torch-gpu", "torch", runtimeSpec(torchPolicy(2), limits("nvidia.com/gpu", "4"))),
		clusterRuntime("unlabelled", "", runtimeSpec(nil, corev1.ResourceRequirements{})),
		&trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mine", Labels: map[string]string{trainer.FrameworkLabel: "plainml"}},
			Spec: runtimeSpec(nil, limits("cpu", "2"))},
		&trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "theirs", Labels: map[string]string{trainer.FrameworkLabel: "torch"}},
			Spec: runtimeSpec(torchPolicy(1), corev1.ResourceRequirements{})},
	}
}

func TestRuntimesCommand(t *testing.T) {
	f := newFakeCluster(t, catalog()...)
	code, out, errOut := f.run("runtimes")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := `NAME               KIND                    FRAMEWORK  NODES  DEVICE   DEVICE COUNT  ENTRYPOINT
ns/mine            TrainingRuntime         plainml    1      cpu      2             python3
torch-distributed  ClusterTrainingRuntime  torch      1      Unknown  Unknown       torchrun
torch-gpu          ClusterTrainingRuntime  torch      2      gpu      8             torchrun
`
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("runtimes (-want +got):\n%s", diff)
	}
	if !strings.Contains(errOut, "ClusterTrainingRuntime unlabelled has no trainer.kubeflow.org/framework label") {
		t.Errorf("stderr does not name the unlabelled runtime: %q", errOut)
	}

	code, out, _ = f.run("-n", "other", "runtimes", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var got []Runtime
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	var names []string
	for _, r := range got {
		names = append(names, r.Kind+"/"+r.Namespace+"/"+r.Name+"/"+r.Framework)
	}
	if diff := cmp.Diff([]string{"TrainingRuntime/other/theirs/torch", "ClusterTrainingRuntime//torch-distributed/torch", "ClusterTrainingRuntime//torch-gpu/torch"}, names); diff != "" {
		t.Errorf("-o json runtimes (-want +got):\n%s", diff)
	}
}

func writeScript(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "train.py")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTrainCommand(t *testing.T) {
	f := newFakeCluster(t, catalog()...)
	script := writeScript(t, "print('hi')\n")

	code, out, errOut := f.run("train", "--num-nodes", "2", "--resources", "cpu=2,memory=4Gi,gpu=1", "--env", "A=1", "--env", "B=x,y",
		"--queue", "q", script, "--", "--lr", "0.1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	name := strings.TrimSpace(out)
	if !regexp.MustCompile(`^[a-z][0-9a-f]{11}$`).MatchString(name) {
		t.Fatalf("train printed %q, want a generated name", out)
	}
	var job trainer.TrainJob
	if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, &job); err != nil {
		t.Fatal(err)
	}
	wantCmd, _ := ScriptCommand("torchrun", script, []byte("print('hi')\n"), []string{"--lr", "0.1"})
	res := quantities("cpu", "2", "memory", "4Gi", "nvidia.com/gpu", "1")
	want := trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"}, Trainer: &trainer.Trainer{
		Command: wantCmd, Env: []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "x,y"}}, NumNodes: ptr.To[int32](2),
		ResourcesPerNode: &corev1.ResourceRequirements{Requests: res, Limits: res},
	}}
	if diff := cmp.Diff(want, job.Spec); diff != "" {
		t.Errorf("TrainJob spec (-want +got):\n%s", diff)
	}
	if job.Labels[QueueLabel] != "q" {
		t.Errorf("labels = %v, want the queue label", job.Labels)
	}

	// A command, on the namespaced runtime (python3 would be its entrypoint), named.
	code, out, errOut = f.run("train", "--runtime", "mine", "--name", "cmd", "--image", "python:3", "--active-deadline-seconds", "600", "--", "python3", "-c", "print($(X))")
	if code != 0 || strings.TrimSpace(out) != "cmd" {
		t.Fatalf("exit %d, out %q: %s", code, out, errOut)
	}
	if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "cmd"}, &job); err != nil {
		t.Fatal(err)
	}
	want = trainer.TrainJobSpec{
		RuntimeRef:            trainer.RuntimeRef{Name: "mine", APIGroup: ptr.To("trainer.kubeflow.org"), Kind: ptr.To("TrainingRuntime")},
		Trainer:               &trainer.Trainer{Image: ptr.To("python:3"), Command: []string{"python3", "-c", "print($(X))"}},
		ActiveDeadlineSeconds: ptr.To[int64](600), // the SDK 0.5's ActiveDeadlineSeconds option
	}
	if diff := cmp.Diff(want, job.Spec); diff != "" {
		t.Errorf("TrainJob spec (-want +got):\n%s", diff)
	}

	// --dry-run prints the TrainJob and creates nothing; a plain runtime runs the script with python3.
	code, out, errOut = f.run("train", "--dry-run", "--runtime", "mine", "--name", "dry", script)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var printed trainer.TrainJob
	if err := yaml.UnmarshalStrict([]byte(out), &printed); err != nil {
		t.Fatalf("--dry-run output: %v\n%s", err, out)
	}
	if c := printed.Spec.Trainer.Command; len(c) < 3 || !strings.Contains(c[2], `exec python3 "$dir"/train.py "$@"`) {
		t.Errorf("--dry-run command = %q, want the script run by python3", c)
	}
	if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "dry"}, &trainer.TrainJob{}); err == nil {
		t.Error("--dry-run created the TrainJob")
	}
}

func TestTrainCommandErrors(t *testing.T) {
	f := newFakeCluster(t, catalog()...)
	script := writeScript(t, "pass\n")
	cases := []struct {
		args     []string
		code     int
		inStderr string
	}{
		{[]string{"train", "--runtime", "nope", script}, ExitFailed, `runtime "nope" not found`},
		{[]string{"train", "--runtime", "theirs", script}, ExitFailed, `runtime "theirs" not found`}, // another namespace's
		{[]string{"train", script, script}, ExitUsage, "one SCRIPT expected"},
		{[]string{"train", "--"}, ExitUsage, "no command after --"},
		{[]string{"train", "--resources", "cpu", script}, ExitUsage, "want NAME=QUANTITY"},
		{[]string{"train", "--env", "NOVALUE", script}, ExitUsage, "want NAME=VALUE"},
		{[]string{"train", "--num-nodes", "-1", script}, ExitUsage, "must be positive"},
		{[]string{"train", "--active-deadline-seconds", "-5", script}, ExitUsage, "--active-deadline-seconds -5: must be positive"},
		{[]string{"train", "--bogus", script}, ExitUsage, "unknown flag: --bogus"},
		{[]string{"train", filepath.Join(t.TempDir(), "missing.py")}, ExitFailed, "reading the script"},
		{[]string{"frobnicate"}, ExitUsage, `unknown command "frobnicate"`},
		{[]string{"get", "a", "b"}, ExitUsage, "at most one"},
		{[]string{"get", "-o", "xml"}, ExitUsage, `-o "xml"`},
		{[]string{"logs"}, ExitUsage, "one job name"},
		{[]string{"wait", "x", "--timeout", "0s"}, ExitUsage, "must be positive"},
		{[]string{"delete"}, ExitUsage, "one or more"},
		{[]string{"delete", "missing"}, ExitFailed, "not found"},
		{[]string{}, ExitUsage, "Commands:"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, _, errOut := f.run(tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.inStderr) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, errOut, tc.code, tc.inStderr)
			}
		})
	}
	code, out, _ := f.run("help", "wait")
	if code != 0 || !strings.Contains(out, "trainyard wait [KIND/]NAME") || !strings.Contains(out, "--timeout") {
		t.Errorf("help wait: exit %d:\n%s", code, out)
	}
}

func trainJob(name string, status trainer.TrainJobStatus) *trainer.TrainJob {
	return &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: metav1.Now()},
		Spec:       trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"}, Trainer: &trainer.Trainer{NumNodes: ptr.To[int32](2)}},
		Status:     status,
	}
}

func jobPod(job, index string, phase corev1.PodPhase) *corev1.Pod {
	p := pod(job+"-node-0-"+index, "node", index, phase, 0, nodeContainer(limits("cpu", "2"), nproc("2")))
	p.Namespace = "ns"
	p.Labels["jobset.sigs.k8s.io/jobset-name"] = job
	p.Status.ContainerStatuses = containerStatuses(&p)
	return &p
}

// containerStatuses says that the pod's containers have started (so that they
// have logs) unless the pod is Pending.
func containerStatuses(p *corev1.Pod) []corev1.ContainerStatus {
	var sts []corev1.ContainerStatus
	for _, c := range p.Spec.Containers {
		st := corev1.ContainerStatus{Name: c.Name}
		switch p.Status.Phase {
		case corev1.PodRunning:
			st.State.Running = &corev1.ContainerStateRunning{}
		case corev1.PodSucceeded, corev1.PodFailed:
			st.State.Terminated = &corev1.ContainerStateTerminated{}
		}
		sts = append(sts, st)
	}
	return sts
}

func TestGetCommand(t *testing.T) {
	objs := append(catalog(),
		trainJob("alpha", trainer.TrainJobStatus{Phase: "Running", Reason: "AllNodesStarted", Message: "2/2 nodes running"}),
		jobPod("alpha", "1", corev1.PodRunning), jobPod("alpha", "0", corev1.PodRunning),
		trainJob("beta", trainer.TrainJobStatus{Phase: "Pending", Reason: "WaitingForPods"}),
	)
	f := newFakeCluster(t, objs...)
	code, out, errOut := f.run("get", "alpha")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"Name:      alpha\n", "Status:    Running\n", "Reason:    AllNodesStarted\n", "Message:   2/2 nodes running\n", "Nodes:     2\n",
		"  Step: node-0, Status: Running, Devices: cpu x 2, Pod: alpha-node-0-0\n  Step: node-1, Status: Running, Devices: cpu x 2, Pod: alpha-node-0-1\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("get alpha lacks %q:\n%s", want, out)
		}
	}

	code, out, _ = f.run("get", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var jobs []trainjob.Job
	if err := json.Unmarshal([]byte(out), &jobs); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	var got []string
	for _, j := range jobs {
		got = append(got, fmt.Sprintf("%s %s %d steps", j.Name, j.Status, len(j.Steps)))
	}
	if diff := cmp.Diff([]string{"alpha Running 2 steps", "beta Pending 0 steps"}, got); diff != "" {
		t.Errorf("get -o json (-want +got):\n%s", diff)
	}

	code, out, _ = f.run("get")
	if code != 0 || !regexp.MustCompile(`(?m)^beta\s+torch-distributed\s+2\s+Pending\s+WaitingForPods\s+`).MatchString(out) {
		t.Errorf("get: exit %d:\n%s", code, out)
	}
	code, _, errOut = f.run("get", "-n", "empty")
	if code != 0 || !strings.Contains(errOut, "no TrainJobs in namespace empty") {
		t.Errorf("get -n empty: exit %d: %s", code, errOut)
	}
}

// get shows under each step the GPUs a process node gave it (the pod's
// trainyard.io/gpus annotation), and -o json lists them; steps without stay
// as they were.
func TestGetShowsGPUs(t *testing.T) {
	gpuPod := func(index, uuid string) *corev1.Pod {
		p := pod("gpu-node-0-"+index, "node", index, corev1.PodRunning, 0, nodeContainer(limits("nvidia.com/gpu", "1"), nproc("1")))
		p.Namespace = "ns"
		p.Labels["jobset.sigs.k8s.io/jobset-name"] = "gpu"
		p.Annotations = map[string]string{"trainyard.io/gpus": "node=" + uuid}
		return &p
	}
	noAnnotation := gpuPod("2", "")
	noAnnotation.Annotations = nil
	f := newFakeCluster(t, append(catalog(),
		trainJob("gpu", trainer.TrainJobStatus{Phase: "Running", Reason: "AllNodesStarted", Message: "3/3 nodes running"}),
		gpuPod("0", "GPU-11111111-aaaa"), gpuPod("1", "GPU-22222222-bbbb"), noAnnotation)...)
	code, out, errOut := f.run("get", "gpu")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := "Steps:\n" +
		"  Step: node-0, Status: Running, Devices: gpu x 1, Pod: gpu-node-0-0\n    GPUs: GPU-11111111-aaaa\n" +
		"  Step: node-1, Status: Running, Devices: gpu x 1, Pod: gpu-node-0-1\n    GPUs: GPU-22222222-bbbb\n" +
		"  Step: node-2, Status: Running, Devices: gpu x 1, Pod: gpu-node-0-2\n"
	if !strings.HasSuffix(out, want) {
		t.Errorf("get gpu does not end with\n%s\ngot:\n%s", want, out)
	}

	code, out, _ = f.run("get", "gpu", "-o", "json")
	var j trainjob.Job
	if err := json.Unmarshal([]byte(out), &j); code != 0 || err != nil {
		t.Fatalf("get -o json: exit %d, %v:\n%s", code, err, out)
	}
	var got [][]string
	for _, s := range j.Steps {
		got = append(got, s.GPUs)
	}
	if diff := cmp.Diff([][]string{{"GPU-11111111-aaaa"}, {"GPU-22222222-bbbb"}, nil}, got); diff != "" {
		t.Errorf("steps' gpus in -o json (-want +got):\n%s", diff)
	}
	if strings.Count(out, `"gpus"`) != 2 {
		t.Errorf("-o json names gpus for a step without any:\n%s", out)
	}
}

func TestWaitAndDeleteCommands(t *testing.T) {
	f := newFakeCluster(t,
		trainJob("done", trainer.TrainJobStatus{Phase: "Complete", Reason: "AllJobsCompleted",
			Conditions: []metav1.Condition{cond("Complete", metav1.ConditionTrue, "AllJobsCompleted", "jobset completed successfully")}}),
		trainJob("broken", trainer.TrainJobStatus{Phase: "Failed", Reason: "FailedJobs", Message: "node-1 failed",
			Conditions: []metav1.Condition{cond("Failed", metav1.ConditionTrue, "FailedJobs", "node-1 failed")}}),
		trainJob("slow", trainer.TrainJobStatus{Phase: "Pending", Reason: "WaitingForPods", NumNodes: ptr.To[int32](2), ReadyNodes: ptr.To[int32](1)}),
	)
	code, out, _ := f.run("wait", "done")
	if code != ExitOK || !strings.Contains(out, "TrainJob done: Complete (AllJobsCompleted)") {
		t.Errorf("wait done: exit %d:\n%s", code, out)
	}
	code, _, errOut := f.run("wait", "broken")
	if code != ExitFailed || !strings.Contains(errOut, "TrainJob broken Failed: FailedJobs: node-1 failed") {
		t.Errorf("wait broken: exit %d: %s", code, errOut)
	}
	code, out, errOut = f.run("wait", "slow", "--timeout", "200ms", "--interval", "20ms")
	if code != ExitTimeout || !strings.Contains(errOut, "not finished after 200ms") ||
		!strings.Contains(out, "TrainJob slow: Pending, 1/2 nodes ready (WaitingForPods)") {
		t.Errorf("wait slow: exit %d:\n%s\n%s", code, out, errOut)
	}
	if n := strings.Count(out, "\n"); n != 1 {
		t.Errorf("wait slow printed %d lines while nothing changed, want 1:\n%s", n, out)
	}
	code, _, errOut = f.run("wait", "gone")
	if code != ExitFailed || !strings.Contains(errOut, "not found") {
		t.Errorf("wait gone: exit %d: %s", code, errOut)
	}

	code, out, _ = f.run("delete", "done", "broken")
	if code != 0 || out != "trainjob done deleted\ntrainjob broken deleted\n" {
		t.Errorf("delete: exit %d: %q", code, out)
	}
	var list trainer.TrainJobList
	if err := f.c.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "slow" {
		t.Errorf("after delete: %d TrainJobs left, want only slow", len(list.Items))
	}
}

// Interrupted (the context is cancelled, as Ctrl-C does), wait exits 130 quietly.
func TestWaitInterrupted(t *testing.T) {
	f := newFakeCluster(t, trainJob("slow", trainer.TrainJobStatus{Phase: "Pending"}))
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut bytes.Buffer
	e := &env{stdout: &out, stderr: &errOut}
	e.connect = func() (*Clients, error) { return &Clients{Client: f.c, Namespace: "ns"}, nil }
	go func() {
		time.Sleep(100 * time.Millisecond)
		cancel()
	}()
	if code := run(ctx, e, []string{"wait", "slow", "--interval", "10ms"}); code != ExitInterrupted || errOut.Len() != 0 {
		t.Errorf("exit %d, stderr %q; want %d and nothing", code, errOut.String(), ExitInterrupted)
	}
}
