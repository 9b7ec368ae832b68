package processnode_e2e

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/localcluster"
	"github.com/trainyard/trainyard/pkg/processnode/gpus"
)

// The GPU tests run on the suite's process node, which lists its GPUs with
// testdata/nvidia-smi (TestMain): two H200s that do not exist. What a pod
// gets is checked where a program would see it, its environment, and on the
// pod (the trainyard.io/gpus annotation). The other tests are unaffected:
// their pods ask for no GPUs, and a pod without GPUs gets
// CUDA_VISIBLE_DEVICES empty whether the node has GPUs or not.

// fakeGPUs are the UUIDs testdata/nvidia-smi prints, by index.
var fakeGPUs = []string{"GPU-11111111-1111-4111-8111-111111111111", "GPU-22222222-2222-4222-8222-222222222222"}

// The Node advertises the GPUs as the device plugin and GFD would.
func TestGPUNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	checkGPUNode(t, ctx)
}

func checkGPUNode(t *testing.T, ctx context.Context) {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Get(ctx, localcluster.ProcessNodeName(0), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for what, list := range map[string]corev1.ResourceList{"capacity": n.Status.Capacity, "allocatable": n.Status.Allocatable} {
		if q := list[gpus.Resource]; q.Value() != 2 {
			t.Errorf("%s %s = %s, want 2", what, gpus.Resource, q.String())
		}
	}
	got := map[string]string{}
	for _, k := range []string{gpus.LabelProduct, gpus.LabelMemory, gpus.LabelCount} {
		got[k] = n.Labels[k]
	}
	want := map[string]string{gpus.LabelProduct: "NVIDIA-H200", gpus.LabelMemory: "143771", gpus.LabelCount: "2"}
	if !maps.Equal(got, want) {
		t.Errorf("GPU labels %v, want %v", got, want)
	}
}

// gpuProbe is a pod whose container prints what it sees of the GPUs, with a
// fresh id per run, then sleeps until it is deleted.
func gpuProbe(ns, name string, n int, env ...corev1.EnvVar) *corev1.Pod {
	c := corev1.Container{Name: "main", Image: "probe", Env: env, Command: []string{"sh", "-c",
		`echo "run=$(cat /proc/sys/kernel/random/uuid) CUDA=[$CUDA_VISIBLE_DEVICES] NVIDIA=[$NVIDIA_VISIBLE_DEVICES]"; exec sleep 600`}}
	if n > 0 {
		c.Resources.Limits = corev1.ResourceList{gpus.Resource: *resource.NewQuantity(int64(n), resource.DecimalSI)}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{c}},
	}
}

var probeRE = regexp.MustCompile(`run=(\S+) CUDA=\[([^\]]*)\] NVIDIA=\[([^\]]*)\]`)

// probeSeen is what one run of a gpuProbe printed, and its pod's annotation.
type probeSeen struct {
	run, cuda, nvidia string
	annotation        string
	annotated         bool
}

// waitProbe waits for a run of the probe other than notRun and returns what
// it saw.
func waitProbe(t *testing.T, ctx context.Context, ns, name, notRun string) probeSeen {
	t.Helper()
	var last string
	for ctx.Err() == nil {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodRunning {
			b, err := cs.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{Container: "main"}).DoRaw(ctx)
			if m := probeRE.FindStringSubmatch(string(b)); err == nil && m != nil && m[1] != notRun {
				v, ok := p.Annotations[gpus.Annotation]
				return probeSeen{run: m[1], cuda: m[2], nvidia: m[3], annotation: v, annotated: ok}
			}
			last = fmt.Sprintf("log %q, %v", b, err)
		} else if err == nil {
			last = fmt.Sprintf("phase %s %s %s", p.Status.Phase, p.Status.Reason, p.Status.Message)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("pod %s/%s never printed what it sees: %s", ns, name, last)
	return probeSeen{}
}

// checkOwnGPU asserts that a 1-GPU probe saw exactly the GPU its pod names.
func checkOwnGPU(t *testing.T, name string, s probeSeen) {
	t.Helper()
	if !slices.Contains(fakeGPUs, s.cuda) {
		t.Errorf("%s: CUDA_VISIBLE_DEVICES=%q, want one of the node's GPUs %v", name, s.cuda, fakeGPUs)
	}
	if s.nvidia != s.cuda {
		t.Errorf("%s: NVIDIA_VISIBLE_DEVICES=%q, want %q as CUDA_VISIBLE_DEVICES", name, s.nvidia, s.cuda)
	}
	if want := "main=" + s.cuda; s.annotation != want {
		t.Errorf("%s: annotation %s=%q, want %q", name, gpus.Annotation, s.annotation, want)
	}
}

// deletePods deletes the pods of ns and waits until they are gone, so that
// their GPUs are free for the next test.
func deletePods(t *testing.T, ctx context.Context, ns string, names ...string) {
	t.Helper()
	for _, name := range names {
		if err := cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting pod %s/%s: %v", ns, name, err)
		}
	}
	for ctx.Err() == nil {
		left := 0
		for _, name := range names {
			if _, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				left++
			}
		}
		if left == 0 {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Errorf("pods %v of %s not gone: %v", names, ns, ctx.Err())
}

// Two pods asking for a GPU each get different ones, in their environment and
// on the pod; a value of the container's own does not widen what it got; a
// pod without a GPU request sees none; a third GPU pod does not fit.
func TestGPUPodsGetTheirOwn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const ns = "gpu-pods"
	createNamespace(t, ctx, ns)
	pods := []*corev1.Pod{
		gpuProbe(ns, "one", 1),
		gpuProbe(ns, "two", 1, corev1.EnvVar{Name: "CUDA_VISIBLE_DEVICES", Value: "0,1"}, corev1.EnvVar{Name: "NVIDIA_VISIBLE_DEVICES", Value: "all"}),
		gpuProbe(ns, "cpu", 0),
	}
	for _, p := range pods {
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	defer deletePods(t, ctx, ns, "one", "two", "cpu", "three")
	one, two, cpu := waitProbe(t, ctx, ns, "one", ""), waitProbe(t, ctx, ns, "two", ""), waitProbe(t, ctx, ns, "cpu", "")
	t.Logf("one: %+v\ntwo: %+v\ncpu: %+v", one, two, cpu)
	checkOwnGPU(t, "one", one)
	checkOwnGPU(t, "two", two)
	if one.cuda == two.cuda {
		t.Errorf("pods one and two share GPU %s", one.cuda)
	}
	if cpu.cuda != "" || cpu.nvidia != "void" || cpu.annotated {
		t.Errorf("cpu: CUDA_VISIBLE_DEVICES=%q NVIDIA_VISIBLE_DEVICES=%q, annotated %v %q; want empty, void, no annotation",
			cpu.cuda, cpu.nvidia, cpu.annotated, cpu.annotation)
	}

	if _, err := cs.CoreV1().Pods(ns).Create(ctx, gpuProbe(ns, "three", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	msg := waitUnschedulable(t, ctx, ns, "three")
	t.Logf("three: %s", msg)
}

// waitUnschedulable waits until the scheduler says the pod does not fit for
// want of GPUs, and returns its message.
func waitUnschedulable(t *testing.T, ctx context.Context, ns, name string) string {
	t.Helper()
	var last string
	for ctx.Err() == nil {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && strings.Contains(c.Message, "Insufficient "+gpus.Resource) {
					return c.Message
				}
			}
			last = fmt.Sprintf("phase %s, node %q, conditions %+v", p.Status.Phase, p.Spec.NodeName, p.Status.Conditions)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("pod %s/%s: the scheduler never said Insufficient %s: %s", ns, name, gpus.Resource, last)
	return ""
}

// gpuTrainJob is a TrainJob on torch-distributed whose nodes ask for n GPUs
// each and print what they see.
func gpuTrainJob(ns, name string, nodes int32, n int64, command string) *trainer.TrainJob {
	return &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"},
			Trainer: &trainer.Trainer{
				NumNodes: ptr.To(nodes),
				Command:  []string{"sh", "-c", command},
				ResourcesPerNode: &corev1.ResourceRequirements{Limits: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("1"),
					gpus.Resource:      *resource.NewQuantity(n, resource.DecimalSI),
				}},
			},
		},
	}
}

// A 2-node TrainJob with a GPU per node: each node's pod gets its own GPU,
// sees it in CUDA_VISIBLE_DEVICES, and `trainyard get` shows it per step.
func TestGPUTrainJobNodes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const ns, name = "gpu-trainjob", "two-gpus"
	createNamespace(t, ctx, ns)
	bin := buildCLI(t)
	// Long enough for both nodes to be seen running at once.
	job := gpuTrainJob(ns, name, 2, 1, `echo "node=$PET_NODE_RANK nproc=$PET_NPROC_PER_NODE CUDA=[$CUDA_VISIBLE_DEVICES]"; sleep 8`)
	if err := c.Client().Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	if err := waitAllRunning(ctx, ns, 2); err != nil {
		t.Error(err)
	}
	if cond := waitFinished(t, ctx, ns, name); cond.Type != "Complete" {
		t.Fatalf("TrainJob %s: %s/%s: %s", name, cond.Type, cond.Reason, cond.Message)
	}
	logs := podLogs(t, ctx, ns, name)
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "jobset.sigs.k8s.io/jobset-name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{} // GPU -> rank
	for _, p := range pods.Items {
		rank := p.Annotations["batch.kubernetes.io/job-completion-index"]
		m := regexp.MustCompile(`node=(\d) nproc=(\S+) CUDA=\[([^\]]*)\]`).FindStringSubmatch(logs[rank])
		if m == nil {
			t.Errorf("node %s printed no GPUs: %q", rank, logs[rank])
			continue
		}
		gpu := m[3]
		if !slices.Contains(fakeGPUs, gpu) || m[2] != "1" {
			t.Errorf("node %s: CUDA_VISIBLE_DEVICES=%q PET_NPROC_PER_NODE=%s, want one of %v and 1", rank, gpu, m[2], fakeGPUs)
		}
		if other, dup := seen[gpu]; dup {
			t.Errorf("nodes %s and %s both got %s", other, rank, gpu)
		}
		seen[gpu] = rank
		if got, want := p.Annotations[gpus.Annotation], "node="+gpu; got != want {
			t.Errorf("node %s: annotation %q, want %q", rank, got, want)
		}
	}
	out, code := runTrainyard(t, bin, ns, "get", name)
	if code != 0 {
		t.Fatalf("trainyard get: exit %d", code)
	}
	for gpu, rank := range seen {
		want := regexp.MustCompile(`(?m)^  Step: node-` + rank + `, Status: Succeeded, Devices: gpu x 1, Pod: \S+\n    GPUs: ` + gpu + `$`)
		if !want.MatchString(out) {
			t.Errorf("trainyard get does not show %s under node-%s:\n%s", gpu, rank, out)
		}
	}
}

// A TrainJob asking for more GPUs per node than the node has stays Pending,
// with the scheduler's reason in its status.
func TestGPUTrainJobTooMany(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ns, name = "gpu-too-many", "three-gpus"
	createNamespace(t, ctx, ns)
	job := gpuTrainJob(ns, name, 1, 3, "echo never")
	if err := c.Client().Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Client().Delete(ctx, job); err != nil {
			t.Errorf("deleting TrainJob %s: %v", name, err)
		}
	}()
	var last trainer.TrainJobStatus
	for ctx.Err() == nil {
		var j trainer.TrainJob
		if err := c.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &j); err == nil {
			last = j.Status
			if strings.Contains(j.Status.Message, "Insufficient "+gpus.Resource) {
				t.Logf("TrainJob %s: %s %s: %s", name, j.Status.Phase, j.Status.Reason, j.Status.Message)
				if j.Status.Phase != trainer.TrainJobPending {
					t.Errorf("phase %s, want Pending", j.Status.Phase)
				}
				return
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("TrainJob %s never said Insufficient %s: %+v", name, gpus.Resource, last)
}

// The GPUs of a running pod stay its own across a crash of the agent: the
// next agent runs the pod again on the GPU recorded for it, not on the first
// free one, and gives that free one to a new pod.
func TestGPUAllocationSurvivesAgentRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const ns = "gpu-restart"
	createNamespace(t, ctx, ns)
	defer deletePods(t, ctx, ns, "first", "second", "third")
	// first gets the node's first GPU, second the other; with first gone, the
	// first GPU is free and second holds the other.
	var before probeSeen
	for _, name := range []string{"first", "second"} {
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, gpuProbe(ns, name, 1), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		before = waitProbe(t, ctx, ns, name, "")
		checkOwnGPU(t, name, before)
	}
	if before.cuda != fakeGPUs[1] {
		t.Fatalf("second got %s, want %s (the lowest free GPU, after first's %s): were both free?", before.cuda, fakeGPUs[1], fakeGPUs[0])
	}
	deletePods(t, ctx, ns, "first")

	start := time.Now()
	if err := c.RestartProcessNode(ctx, 0, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t.Logf("agent killed and started again in %s", time.Since(start).Round(time.Millisecond))
	after := waitProbe(t, ctx, ns, "second", before.run)
	t.Logf("second before the restart: %+v\nsecond after: %+v", before, after)
	checkOwnGPU(t, "second", after)
	if after.cuda != before.cuda {
		t.Errorf("second ran again on %s, want %s, its GPU before the agent restarted", after.cuda, before.cuda)
	}

	if _, err := cs.CoreV1().Pods(ns).Create(ctx, gpuProbe(ns, "third", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	third := waitProbe(t, ctx, ns, "third", "")
	checkOwnGPU(t, "third", third)
	if third.cuda != fakeGPUs[0] {
		t.Errorf("third got %s, want %s, the GPU no one holds", third.cuda, fakeGPUs[0])
	}
	checkGPUNode(t, ctx)
}

// runtimes/torch-distributed-gpu.yaml, as shipped (NVIDIA's image, which the
// process node does not pull; one GPU per node; a memory-backed /dev/shm),
// runs a script through `trainyard train` on the process node: each node gets
// one of the fake GPUs and one torchrun process (PET_NPROC_PER_NODE from the
// GPUs), and both train. The host's torch has no CUDA here, so mnist.py trains
// with gloo; on a host with GPUs the same TrainJob runs on them.
func TestGPURuntimeRunsOnTheProcessNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const ns = "gpu-runtime"
	createNamespace(t, ctx, ns)
	bin := buildCLI(t)
	out, code := runTrainyard(t, bin, ns, "train", "--runtime", "torch-distributed-gpu", "--num-nodes", "2",
		"--env", "MNIST_STEPS=100", "--env", "EXPECT_WORLD_SIZE=2", "--env", "OMP_NUM_THREADS=1", "examples/mnist/mnist.py")
	job := strings.TrimSpace(out)
	if code != 0 || job == "" {
		t.Fatalf("train: exit %d, printed %q", code, out)
	}
	if cond := waitFinished(t, ctx, ns, job); cond.Type != "Complete" {
		t.Fatalf("TrainJob %s: %s/%s: %s", job, cond.Type, cond.Reason, cond.Message)
	}
	out, _ = runTrainyard(t, bin, ns, "logs", job)
	for _, rank := range []string{"0", "1"} {
		if !regexp.MustCompile(`(?m)^\[node-` + rank + `\]: .*MNIST_RESULT rank=` + rank + ` world_size=2 .* ok=True`).MatchString(out) {
			t.Errorf("node-%s did not train (world size 2, ok)", rank)
		}
	}
	out, _ = runTrainyard(t, bin, ns, "get", job)
	got := regexp.MustCompile(`(?m)^    GPUs: (\S+)$`).FindAllStringSubmatch(out, -1)
	if len(got) != 2 || got[0][1] == got[1][1] || !slices.Contains(fakeGPUs, got[0][1]) || !slices.Contains(fakeGPUs, got[1][1]) {
		t.Errorf("trainyard get shows GPUs %v, want the two fake GPUs, one per node", got)
	}
}
