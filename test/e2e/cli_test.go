package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	tycli "github.com/trainyard/trainyard/pkg/cli"
	"github.com/trainyard/trainyard/pkg/controller/trainjob"
	"github.com/trainyard/trainyard/pkg/version"
	"github.com/trainyard/trainyard/test/e2eutil"
)

// The trainyard CLI, built once per test binary, driven as a user would: a
// process with --kubeconfig (and -n), its stdout, stderr and exit code.
var (
	cliOnce sync.Once
	cliBin  string
	cliErr  error
)

func trainyardCLI(t *testing.T) string {
	t.Helper()
	cliOnce.Do(func() {
		// In the suite's state directory, which goes away after a passing run.
		cliBin = filepath.Join(c.StateDir(), "trainyard-cli", "trainyard")
		cliErr = e2eutil.Build(repoFile("."), "trainyard", cliBin)
	})
	if cliErr != nil {
		t.Fatal(cliErr)
	}
	return cliBin
}

type cliResult struct {
	stdout, stderr string
	code           int
}

// runCLI runs trainyard against the suite's cluster in namespace ns ("" for the
// kubeconfig's default) with a timeout.
func runCLI(t *testing.T, ns string, timeout time.Duration, args ...string) cliResult {
	t.Helper()
	full := []string{"--kubeconfig", c.Kubeconfig()}
	if ns != "" {
		full = append(full, "-n", ns)
	}
	full = append(full, args...)
	cmd := exec.Command(trainyardCLI(t), full...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		werr := <-done
		t.Fatalf("trainyard %s: still running after %s (killed: %v)\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), timeout, werr, out.String(), errOut.String())
	}
	r := cliResult{stdout: out.String(), stderr: errOut.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	t.Logf("$ trainyard %s  (exit %d)\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	return r
}

// mustCLI runs trainyard and fails the test unless it exits 0.
func mustCLI(t *testing.T, ns string, args ...string) cliResult {
	t.Helper()
	r := runCLI(t, ns, long, args...)
	if r.code != 0 {
		t.Fatalf("trainyard %s: exit %d\n%s", strings.Join(args, " "), r.code, r.stderr)
	}
	return r
}

// `trainyard runtimes` lists the shipped runtimes with their framework, nodes
// and devices, as a table and as JSON.
func TestCLIRuntimes(t *testing.T) {
	r := mustCLI(t, "", "runtimes")
	if !regexp.MustCompile(`(?m)^torch-distributed\s+ClusterTrainingRuntime\s+torch\s+1\s+Unknown\s+Unknown\s+torchrun$`).MatchString(r.stdout) {
		t.Errorf("runtimes does not list torch-distributed with framework torch:\n%s", r.stdout)
	}
	r = mustCLI(t, "", "runtimes", "-o", "json")
	var rts []tycli.Runtime
	if err := json.Unmarshal([]byte(r.stdout), &rts); err != nil {
		t.Fatalf("runtimes -o json: %v\n%s", err, r.stdout)
	}
	got := map[string]string{}
	for _, rt := range rts {
		got[rt.Name] = fmt.Sprintf("%s %s %d %s x %s", rt.Kind, rt.Framework, rt.NumNodes, rt.Device, rt.DeviceCount)
	}
	want := map[string]string{
		"torch-distributed":              "ClusterTrainingRuntime torch 1 Unknown x Unknown",
		"torch-distributed-gpu":          "ClusterTrainingRuntime torch 1 gpu x 1",
		"torch-distributed-with-dataset": "ClusterTrainingRuntime torch 1 Unknown x Unknown",
		// The runtime of make run, which a local cluster installs too.
		"torch-distributed-fashion-mnist": "ClusterTrainingRuntime torch 1 Unknown x Unknown",
		"plain-ml":                        "ClusterTrainingRuntime plainml 1 Unknown x Unknown",
		"jax-distributed":                 "ClusterTrainingRuntime jax 1 Unknown x Unknown",
		"xgboost-distributed":             "ClusterTrainingRuntime xgboost 1 Unknown x Unknown",
		"flux-distributed":                "ClusterTrainingRuntime flux 1 Unknown x 1",
		"torchtune-llama3.2-1b":           "ClusterTrainingRuntime torchtune 1 gpu x 2",
		"torchtune-llama3.2-3b":           "ClusterTrainingRuntime torchtune 1 gpu x 2",
		"torchtune-qwen2.5-1.5b":          "ClusterTrainingRuntime torchtune 1 gpu x 2",
		"mpi-distributed":                 "ClusterTrainingRuntime mpi 1 Unknown x 1",
		"deepspeed-distributed":           "ClusterTrainingRuntime deepspeed 1 Unknown x 1",
		"mlx-distributed":                 "ClusterTrainingRuntime mlx 1 Unknown x 1",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("runtimes -o json (-want +got):\n%s", diff)
	}

	// One runtime by name, as a table; a missing one names both places looked in.
	r = mustCLI(t, "", "runtimes", "torch-distributed-gpu")
	if !regexp.MustCompile(`^NAME\s+KIND\s+FRAMEWORK\s+NODES\s+DEVICE\s+DEVICE COUNT\s+ENTRYPOINT\ntorch-distributed-gpu\s+ClusterTrainingRuntime\s+torch\s+1\s+gpu\s+1\s+torchrun\n$`).MatchString(r.stdout) {
		t.Errorf("runtimes torch-distributed-gpu:\n%s", r.stdout)
	}
	r = runCLI(t, "", short, "runtimes", "no-such-runtime")
	if r.code != tycli.ExitFailed || !strings.Contains(r.stderr, "no TrainingRuntime in namespace default and no ClusterTrainingRuntime") {
		t.Errorf("runtimes no-such-runtime: exit %d, stderr %q; want 1 and both places named", r.code, r.stderr)
	}
}

// wait --for Running returns while the job runs; events shows the manager's
// JobSetCreated and the pods' events; get --runtime lists only the jobs on that
// runtime.
func TestCLIWaitRunningEvents(t *testing.T) {
	ns := newNamespace(t)
	job := runFor(loadTrainJob(t, "examples/trainjob-torch.yaml", ns, "running"), time.Minute)
	if err := cli.Create(ctx(), job); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, ns, long, "wait", "running", "--for", "Running", "--timeout", "2m")
	if r.code != 0 || !strings.Contains(r.stdout, "TrainJob running: Running") {
		t.Fatalf("wait --for Running: exit %d, want 0 and Running\n%s%s", r.code, r.stdout, r.stderr)
	}
	if phase := get(t, ns, "running").Status.Phase; phase != trainer.TrainJobRunning {
		t.Errorf("after wait --for Running the phase is %s", phase)
	}

	// The manager's event is on the TrainJob; the scheduler's on the pods.
	waitFor(t, short, func() error {
		r := runCLI(t, ns, short, "events", "running")
		if r.code != 0 || !strings.HasPrefix(r.stdout, "LAST SEEN") {
			return fmt.Errorf("events: exit %d", r.code)
		}
		for _, re := range []string{`(?m)\sNormal\s+JobSetCreated\s+trainjob/running\s+Created JobSet running$`, `(?m)\sScheduled\s+pod/running-node-0-0-`} {
			if !regexp.MustCompile(re).MatchString(r.stdout) {
				return fmt.Errorf("events lack %s", re)
			}
		}
		return nil
	})
	r = mustCLI(t, ns, "events", "running", "-o", "json")
	var evs []tycli.Event
	if err := json.Unmarshal([]byte(r.stdout), &evs); err != nil || len(evs) == 0 {
		t.Fatalf("events -o json: %v\n%s", err, r.stdout)
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].LastSeen.Before(&evs[i-1].LastSeen) {
			t.Errorf("events out of order: %s %s/%s at %s after %s", evs[i].Reason, evs[i].Kind, evs[i].Object, evs[i].LastSeen, evs[i-1].LastSeen)
		}
	}

	mustCLI(t, ns, "train", "--name", "plain", "--runtime", "plain-ml", "--", "python3", "-c", "pass")
	r = mustCLI(t, ns, "get", "--runtime", "torch-distributed")
	if !regexp.MustCompile(`(?m)^running\s+torch-distributed\s+2\s+Running\s`).MatchString(r.stdout) || strings.Contains(r.stdout, "plain") {
		t.Errorf("get --runtime torch-distributed:\n%s", r.stdout)
	}
	r = mustCLI(t, ns, "get", "--runtime", "plain-ml", "-o", "json")
	var jobs []trainjob.Job
	if err := json.Unmarshal([]byte(r.stdout), &jobs); err != nil || len(jobs) != 1 || jobs[0].Name != "plain" {
		t.Errorf("get --runtime plain-ml -o json: %v\n%s", err, r.stdout)
	}
}

// train → get → wait → delete on two CPU nodes: the JobSet has both nodes with
// the asked resources (requests = limits) and env, and the script in the command.
func TestCLITrainGetWaitDelete(t *testing.T) {
	ns := newNamespace(t)
	script := filepath.Join(t.TempDir(), "train.py")
	if err := os.WriteFile(script, []byte("import os\nprint('hello from', os.environ['PET_NODE_RANK'])\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := mustCLI(t, ns, "train", "--runtime", "torch-distributed", "--num-nodes", "2", "--resources", "cpu=1,memory=512Mi",
		"--env", "GREETING=hello", "--env", "MNIST_STEPS=5", script)
	name := strings.TrimSpace(r.stdout)
	if !regexp.MustCompile(`^[a-z][0-9a-f]{11}$`).MatchString(name) {
		t.Fatalf("train printed %q, want the generated TrainJob name", r.stdout)
	}

	job := get(t, ns, name)
	var js []jobsetv1alpha2.JobSet
	waitFor(t, short, func() error {
		if js = jobSetsOf(t, job); len(js) != 1 {
			return fmt.Errorf("%d JobSets of TrainJob %s", len(js), name)
		}
		return nil
	})
	node := js[0].Spec.ReplicatedJobs[0]
	if node.Name != "node" || ptr.Deref(node.Template.Spec.Parallelism, 0) != 2 || ptr.Deref(node.Template.Spec.Completions, 0) != 2 {
		t.Errorf("replicated job %s: parallelism %v, completions %v; want node with 2 and 2",
			node.Name, node.Template.Spec.Parallelism, node.Template.Spec.Completions)
	}
	ctr := node.Template.Spec.Template.Spec.Containers[0]
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("512Mi")}
	if diff := cmp.Diff(corev1.ResourceRequirements{Requests: res, Limits: res}, ctr.Resources); diff != "" {
		t.Errorf("node container resources (-want +got):\n%s", diff)
	}
	env := map[string]string{}
	for _, e := range ctr.Env {
		env[e.Name] = e.Value
	}
	for k, v := range map[string]string{"GREETING": "hello", "MNIST_STEPS": "5", "PET_NNODES": "2", "PET_NPROC_PER_NODE": "1"} {
		if env[k] != v {
			t.Errorf("node env %s = %q, want %q (env %v)", k, env[k], v, env)
		}
	}
	if len(ctr.Command) < 3 || ctr.Command[0] != "bash" || !strings.Contains(ctr.Command[2], "print('hello from', os.environ['PET_NODE_RANK'])") ||
		!strings.Contains(ctr.Command[2], `exec torchrun "$dir"/train.py`) {
		t.Errorf("node command does not carry the script to torchrun: %q", ctr.Command)
	}

	// get shows both nodes as steps, with the device and torchrun's process count.
	waitFor(t, long, func() error {
		r := runCLI(t, ns, short, "get", name, "-o", "json")
		var j trainjob.Job
		if err := json.Unmarshal([]byte(r.stdout), &j); err != nil {
			return fmt.Errorf("get -o json: exit %d: %v", r.code, err)
		}
		if len(j.Steps) != 2 || j.NumNodes != 2 || j.Steps[0].Name != "node-0" || j.Steps[1].Name != "node-1" {
			return fmt.Errorf("steps %+v, nodes %d", j.Steps, j.NumNodes)
		}
		return nil
	})
	r = mustCLI(t, ns, "get", name)
	for _, rank := range []string{"0", "1"} {
		if !regexp.MustCompile(`Step: node-` + rank + `, Status: (Pending|Running|Succeeded), Devices: cpu x 1, Pod: ` + name + `-node-0-` + rank).MatchString(r.stdout) {
			t.Errorf("get %s does not show step node-%s with cpu x 1:\n%s", name, rank, r.stdout)
		}
	}

	r = runCLI(t, ns, long, "wait", name, "--timeout", "3m")
	if r.code != 0 || !strings.Contains(r.stdout, "TrainJob "+name+": Complete") {
		t.Fatalf("wait: exit %d, want 0 and Complete\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = mustCLI(t, ns, "get")
	if !regexp.MustCompile(`(?m)^` + name + `\s+torch-distributed\s+2\s+Complete\s`).MatchString(r.stdout) {
		t.Errorf("get does not list %s as Complete:\n%s", name, r.stdout)
	}

	r = mustCLI(t, ns, "delete", name)
	if r.stdout != "trainjob "+name+" deleted\n" {
		t.Errorf("delete printed %q", r.stdout)
	}
	waitFor(t, long, func() error {
		err := cli.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, &jobsetv1alpha2.JobSet{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("JobSet %s still there (%v)", name, err)
		}
		return nil
	})
	if r := runCLI(t, ns, short, "get", name); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("get after delete: exit %d, stderr %q; want 1 and not found", r.code, r.stderr)
	}
}

// A GPU job: --resources gpu=2 is nvidia.com/gpu, and get shows gpu x 2.
func TestCLITrainGPU(t *testing.T) {
	ns := newNamespace(t)
	mustCLI(t, ns, "train", "--name", "gpus", "--num-nodes", "2", "--resources", "cpu=1,gpu=2", "--", "torchrun", "/app/train.py")
	r := runCLI(t, ns, long, "wait", "gpus", "--timeout", "3m")
	if r.code != 0 {
		t.Fatalf("wait: exit %d\n%s", r.code, r.stderr)
	}
	r = mustCLI(t, ns, "get", "gpus", "-o", "yaml")
	for _, rank := range []string{"0", "1"} {
		if !strings.Contains(r.stdout, "deviceCount: \"2\"\n  name: node-"+rank+"\n") || !strings.Contains(r.stdout, "device: gpu") {
			t.Errorf("get -o yaml does not show node-%s with 2 GPUs:\n%s", rank, r.stdout)
		}
	}
	for _, p := range pods(t, ns, "gpus") {
		if q := p.Spec.Containers[0].Resources.Limits["nvidia.com/gpu"]; q.Value() != 2 {
			t.Errorf("pod %s: nvidia.com/gpu limit %s, want 2", p.Name, q.String())
		}
	}
}

// wait exits 1 with the reason on a failing job; the job runs on a namespaced
// TrainingRuntime, which runtimes lists and train prefers.
func TestCLIWaitFailed(t *testing.T) {
	ns := newNamespace(t)
	rt := &trainer.TrainingRuntime{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "torch-crash", Labels: map[string]string{trainer.FrameworkLabel: "torch"}},
		Spec: trainer.TrainingRuntimeSpec{
			MLPolicy: &trainer.MLPolicy{NumNodes: ptr.To[int32](1), MLPolicySource: trainer.MLPolicySource{Torch: &trainer.TorchMLPolicySource{}}},
			Template: trainer.JobSetTemplateSpec{Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{
				Name: "node",
				Template: batchv1.JobTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{trainer.AncestorLabel: trainer.AncestorTrainer}},
					Spec: batchv1.JobSpec{BackoffLimit: ptr.To[int32](0), Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{failLabel: "true"}},
						Spec: corev1.PodSpec{
							RestartPolicy: corev1.RestartPolicyNever,
							Containers:    []corev1.Container{{Name: "node", Image: "example.com/train:v1"}},
						},
					}},
				},
			}}}},
		},
	}
	if err := cli.Create(ctx(), rt); err != nil {
		t.Fatal(err)
	}
	r := mustCLI(t, ns, "runtimes")
	if !regexp.MustCompile(`(?m)^` + ns + `/torch-crash\s+TrainingRuntime\s+torch\s+1\s`).MatchString(r.stdout) {
		t.Errorf("runtimes does not list the namespace's runtime:\n%s", r.stdout)
	}
	mustCLI(t, ns, "train", "--runtime", "torch-crash", "--name", "crash", "--num-nodes", "2", "--", "torchrun", "/app/train.py")
	job := get(t, ns, "crash")
	if k := ptr.Deref(job.Spec.RuntimeRef.Kind, ""); k != trainer.TrainingRuntimeKind {
		t.Errorf("runtimeRef.kind = %q, want TrainingRuntime", k)
	}
	r = runCLI(t, ns, long, "wait", "crash", "--timeout", "3m")
	failed := get(t, ns, "crash")
	if r.code != 1 || failed.Status.Phase != trainer.TrainJobFailedPhase ||
		!strings.Contains(r.stderr, "TrainJob crash Failed: "+failed.Status.Reason+": "+failed.Status.Message) {
		t.Errorf("wait: exit %d, stderr %q; want 1 and the TrainJob's reason %s: %s", r.code, r.stderr, failed.Status.Reason, failed.Status.Message)
	}
	if !strings.Contains(r.stdout, "TrainJob crash: Failed") {
		t.Errorf("wait did not show the Failed phase:\n%s", r.stdout)
	}
}

// --queue labels the TrainJob for Kueue; a queue that does not exist keeps it
// Pending, and wait gives up after its timeout with exit code 3.
func TestCLIQueueAndWaitTimeout(t *testing.T) {
	ns := newNamespace(t)
	mustCLI(t, ns, "train", "--name", "queued", "--queue", "no-such-queue", "--", "torchrun", "/app/train.py")
	if q := get(t, ns, "queued").Labels[tycli.QueueLabel]; q != "no-such-queue" {
		t.Errorf("queue label = %q", q)
	}
	r := runCLI(t, ns, short, "wait", "queued", "--timeout", "5s")
	if r.code != tycli.ExitTimeout || !strings.Contains(r.stdout, "TrainJob queued: Pending") || !strings.Contains(r.stderr, "not finished after 5s") {
		t.Errorf("wait: exit %d; want %d, Pending and the timeout\n%s%s", r.code, tycli.ExitTimeout, r.stdout, r.stderr)
	}
	if p := pods(t, ns, "queued"); len(p) != 0 {
		t.Errorf("%d pods of a job whose queue does not exist", len(p))
	}
}

// `trainyard version` reads the server's version from the public ConfigMap the
// local cluster installs, as a real install's manifests do.
func TestCLIVersion(t *testing.T) {
	r := mustCLI(t, "", "version")
	if !regexp.MustCompile(`(?m)^Client: \S+`).MatchString(r.stdout) {
		t.Errorf("version: no client version:\n%s", r.stdout)
	}
	if !regexp.MustCompile(`(?m)^Server: \S+ \(Kubeflow Trainer API v2\.\d+\.\d+\)$`).MatchString(r.stdout) {
		t.Errorf("version: no server version from the cluster:\n%s%s", r.stdout, r.stderr)
	}
}

// The Kubeflow SDK's train() through its generations, as each writes the
// TrainJob, on the local cluster; then followed with the CLI as the SDK's
// wait_for_job_status does. SDK 0.3 (Kubeflow Trainer v2.1's API) puts its
// labels in spec.labels and its pod changes in podTemplateOverrides; SDK 0.4
// (v2.3's) in a runtimePatch of manager trainer.kubeflow.org/kubeflow-sdk;
// SDK 0.5 also names the runtime's kind (a namespaced TrainingRuntime, which
// get_runtime finds before the ClusterTrainingRuntime of the same name) and
// sets activeDeadlineSeconds (its ActiveDeadlineSeconds option): the CLI's
// `train --runtime` and `--active-deadline-seconds` do the same.
func TestSDKGenerations(t *testing.T) {
	// TrainerClient() reads the control plane's version from the ConfigMap in
	// $KUBEFLOW_SYSTEM_NAMESPACE, default kubeflow-system: there it is,
	// without the user exporting anything.
	var cm corev1.ConfigMap
	if err := cli.Get(ctx(), client.ObjectKey{Namespace: version.SDKNamespace, Name: version.ConfigMapName}, &cm); err != nil {
		t.Errorf("the SDK's default ConfigMap: %v", err)
	} else if got := cm.Data[version.KubeflowTrainerVersionKey]; got != version.KubeflowTrainerVersion {
		t.Errorf("%s in %s/%s = %q, want %q", version.KubeflowTrainerVersionKey, version.SDKNamespace, version.ConfigMapName, got, version.KubeflowTrainerVersion)
	}
	ns := newNamespace(t)
	label := func(gen string) map[string]string { return map[string]string{"sdk.example.com/generation": gen} }
	sdk03 := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sdk03"},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"},
			Trainer:    &trainer.Trainer{NumNodes: ptr.To[int32](2), Command: []string{"torchrun", "train.py"}},
			Labels:     label("0.3"),
			PodTemplateOverrides: []trainer.PodTemplateOverride{{
				TargetJobs: []trainer.PodTemplateOverrideTargetJob{{Name: "node"}},
				Metadata:   &metav1.ObjectMeta{Labels: label("0.3")},
			}},
		},
	}
	sdk04 := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sdk04"},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"},
			Trainer:    &trainer.Trainer{NumNodes: ptr.To[int32](2), Command: []string{"torchrun", "train.py"}},
			RuntimePatches: []trainer.RuntimePatch{{Manager: "trainer.kubeflow.org/kubeflow-sdk", TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{
				Template: &trainer.JobSetTemplatePatch{
					Metadata: &metav1.ObjectMeta{Labels: label("0.4")},
					Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{Name: "node", Template: &trainer.JobTemplatePatch{
						Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{Metadata: &metav1.ObjectMeta{Labels: label("0.4")}}}}}}},
				},
			}}},
		},
	}
	for _, j := range []*trainer.TrainJob{sdk03, sdk04} {
		if err := cli.Create(ctx(), j); err != nil {
			t.Fatal(err)
		}
	}
	for _, j := range []*trainer.TrainJob{sdk03, sdk04} {
		gen := map[string]string{"sdk03": "0.3", "sdk04": "0.4"}[j.Name]
		r := runCLI(t, ns, long, "wait", j.Name, "--timeout", "3m")
		if r.code != 0 {
			t.Fatalf("wait %s: exit %d\n%s%s", j.Name, r.code, r.stdout, r.stderr)
		}
		var js jobsetv1alpha2.JobSet
		if err := cli.Get(ctx(), client.ObjectKeyFromObject(j), &js); err != nil {
			t.Fatal(err)
		}
		podLabels := js.Spec.ReplicatedJobs[0].Template.Spec.Template.Labels
		if js.Labels["sdk.example.com/generation"] != gen || podLabels["sdk.example.com/generation"] != gen {
			t.Errorf("SDK %s: JobSet labels %v, pod labels %v; want the SDK's label on both", gen, js.Labels, podLabels)
		}
	}

	// SDK 0.5: the namespace's torch-distributed shadows the cluster's, and
	// the deadline fails a trainer that would run for ten minutes.
	var shipped trainer.ClusterTrainingRuntime
	if err := cli.Get(ctx(), client.ObjectKey{Name: "torch-distributed"}, &shipped); err != nil {
		t.Fatal(err)
	}
	mine := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "torch-distributed", Labels: shipped.Labels}, Spec: *shipped.Spec.DeepCopy()}
	mine.Spec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].Image = "example.com/team/torch:v1"
	if err := cli.Create(ctx(), mine); err != nil {
		t.Fatal(err)
	}
	mustCLI(t, ns, "train", "--runtime", "torch-distributed", "--name", "sdk05", "--active-deadline-seconds", "10", "--", "sleep", "600")
	job := get(t, ns, "sdk05")
	if k := ptr.Deref(job.Spec.RuntimeRef.Kind, ""); k != trainer.TrainingRuntimeKind || ptr.Deref(job.Spec.ActiveDeadlineSeconds, 0) != 10 {
		t.Errorf("runtimeRef.kind %q, activeDeadlineSeconds %v; want TrainingRuntime and 10", k, job.Spec.ActiveDeadlineSeconds)
	}
	var js []jobsetv1alpha2.JobSet
	waitFor(t, short, func() error {
		if js = jobSetsOf(t, job); len(js) != 1 {
			return fmt.Errorf("%d JobSets", len(js))
		}
		return nil
	})
	if img := js[0].Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].Image; img != "example.com/team/torch:v1" {
		t.Errorf("node image %q: not the namespace's runtime", img)
	}
	r := runCLI(t, ns, long, "wait", "sdk05", "--timeout", "3m")
	if r.code != 1 || !strings.Contains(r.stderr, "DeadlineExceeded") {
		t.Errorf("wait sdk05: exit %d, stderr %q; want 1 and DeadlineExceeded", r.code, r.stderr)
	}
}
