package processnode_e2e

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/test/e2eutil"
	"github.com/trainyard/trainyard/test/prereq"
)

// The initializer tests run Trainyard's initializer (cmd/trainyard-initializer)
// as a TrainJob's dataset initializer on the process node, against a real
// S3-compatible server (test/tools/s3server: gofakes3 with its in-memory
// backend) that runs as a pod of the process node too: pods reach other pods,
// not the host, so that is where the initializer can reach it.

// bigObjectMiB is the object whose fetch the S3 test times.
const bigObjectMiB = 200

// buildInitializer builds cmd/trainyard-initializer and test/tools' s3-server
// (cached in bin/k8s by test/tools/build.sh) and returns their paths.
func buildInitializer(t *testing.T) (initializer, s3server string) {
	t.Helper()
	initializer = e2eutil.BuildTemp(t, repo, "trainyard-initializer")
	cmd := exec.Command(filepath.Join(repo, "test", "tools", "build.sh"), filepath.Join(repo, "bin", "k8s"), "s3-server")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("test/tools/build.sh s3-server: %v\n%s", err, out)
	}
	return initializer, filepath.Join(repo, "bin", "k8s", "s3-server")
}

// startS3 runs the S3 server as a pod, with the files under seed in bucket
// "data", and returns its endpoint.
func startS3(t *testing.T, ctx context.Context, ns, server, seed string) string {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s3"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "s3", Image: "s3-server",
				Command: []string{server, "-listen", "0.0.0.0:9000", "-seed", "data=" + seed},
			}},
		},
	}
	if err := c.Client().Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	for {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "s3", metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
			// Seeding happens before the server listens; its log says when.
			logs, _ := cs.CoreV1().Pods(ns).GetLogs("s3", &corev1.PodLogOptions{Container: "s3"}).DoRaw(ctx)
			if strings.Contains(string(logs), "listening on") {
				return fmt.Sprintf("http://%s:9000", p.Status.PodIP)
			}
		}
		if err == nil && (p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded) {
			t.Fatalf("the S3 server pod ended: %+v", p.Status)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the S3 server pod is not serving: %v", ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// hostPathDir is a new directory under the one host directory the local
// cluster's process nodes allow hostPath volumes under, removed after the test.
func hostPathDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp(c.ProcessHostPathRoot(), "e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// initRuntime is a TrainingRuntime without a framework policy: the dataset
// initializer (the binary under test, no retries of its Job) writes into the
// shared "initializer" volume, a host directory with one subdirectory per
// TrainJob, and the node lists what it finds there.
func initRuntime(ns, initializer, volumeDir string) *trainer.TrainingRuntime {
	perJob := []corev1.EnvVar{{Name: "JOB", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
		FieldPath: "metadata.labels['jobset.sigs.k8s.io/jobset-name']"}}}}
	mount := []corev1.VolumeMount{{Name: "initializer", MountPath: "/workspace", SubPathExpr: "$(JOB)"}}
	volumes := []corev1.Volume{{Name: "initializer", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
		Path: volumeDir, Type: ptr.To(corev1.HostPathDirectoryOrCreate)}}}}
	job := func(name, ancestor string, c corev1.Container) jobsetv1alpha2.ReplicatedJob {
		c.Env = append(c.Env, perJob...)
		c.VolumeMounts = mount
		return jobsetv1alpha2.ReplicatedJob{Name: name, Replicas: 1, Template: batchv1.JobTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{trainer.AncestorLabel: ancestor}},
			Spec: batchv1.JobSpec{BackoffLimit: ptr.To[int32](0), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{c}, Volumes: volumes,
			}}},
		}}
	}
	ini := job("dataset-initializer", trainer.AncestorDatasetInitializer, corev1.Container{
		Name: "dataset-initializer", Image: "trainyard-initializer", Command: []string{initializer, "dataset"},
		// Why it failed reaches the pod's status (and trainyard get).
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	})
	node := job("node", trainer.AncestorTrainer, corev1.Container{
		Name: "node", Image: "busybox", WorkingDir: "/workspace/dataset",
		Command: []string{"sh", "-c", "find . -type f | sort | xargs sha256sum"},
	})
	node.DependsOn = []jobsetv1alpha2.DependsOn{{Name: "dataset-initializer", Status: jobsetv1alpha2.DependencyComplete}}
	return &trainer.TrainingRuntime{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "with-dataset"},
		Spec: trainer.TrainingRuntimeSpec{Template: trainer.JobSetTemplateSpec{Spec: jobsetv1alpha2.JobSetSpec{
			ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{ini, node},
		}}},
	}
}

func datasetJob(ns, name, uri string, env []corev1.EnvVar, secret string) *trainer.TrainJob {
	j := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: trainer.TrainJobSpec{
			RuntimeRef:  trainer.RuntimeRef{Name: "with-dataset", Kind: ptr.To(trainer.TrainingRuntimeKind)},
			Initializer: &trainer.Initializer{Dataset: &trainer.DatasetInitializer{StorageUri: ptr.To(uri), Env: env}},
		},
	}
	if secret != "" {
		j.Spec.Initializer.Dataset.SecretRef = &corev1.LocalObjectReference{Name: secret}
	}
	return j
}

// containerLog is the log of one container of the TrainJob's replicated job.
func containerLog(t *testing.T, ctx context.Context, ns, job, rjob, container string) string {
	t.Helper()
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{
		LabelSelector: "jobset.sigs.k8s.io/jobset-name=" + job + ",jobset.sigs.k8s.io/replicatedjob-name=" + rjob})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("pods of %s/%s: %v (%d)", job, rjob, err, len(pods.Items))
	}
	b, err := cs.CoreV1().Pods(ns).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("logs of %s: %v", pods.Items[0].Name, err)
	}
	return string(b)
}

// terminationMessage is the termination message of the container of the
// TrainJob's replicated job of the same name.
func terminationMessage(t *testing.T, ctx context.Context, ns, job, rjob string) string {
	t.Helper()
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{
		LabelSelector: "jobset.sigs.k8s.io/jobset-name=" + job + ",jobset.sigs.k8s.io/replicatedjob-name=" + rjob})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("pods of %s/%s: %v", job, rjob, err)
	}
	for _, st := range pods.Items[0].Status.ContainerStatuses {
		if st.Name == rjob && st.State.Terminated != nil {
			return st.State.Terminated.Message
		}
	}
	return ""
}

func writeFile(t *testing.T, path string, size int, fill func([]byte)) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	buf := make([]byte, 1<<20)
	for left := size; left > 0; left -= len(buf) {
		n := min(left, len(buf))
		fill(buf[:n])
		if _, err := w.Write(buf[:n]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

var doneRE = regexp.MustCompile(`done: (\d+) files, .* in ([0-9.]+)s \(([0-9.]+) MB/s\)`)

// TestInitializerS3 fetches a prefix of a bucket of a real S3 server (a
// 200 MiB object among small files, an ignored README) through the
// TrainJob's spec.initializer.dataset (signed requests with credentials from
// the secretRef), and the node sees exactly those files; a missing key fails
// the TrainJob, with the initializer's message in its log.
func TestInitializerS3(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	ns := "init-s3"
	createNamespace(t, ctx, ns)
	initializer, server := buildInitializer(t)

	seed := t.TempDir()
	rng := rand.NewChaCha8([32]byte{1})
	writeFile(t, filepath.Join(seed, "fashion", "train", "part-0.bin"), 1000, func(b []byte) { _, _ = rng.Read(b) })
	writeFile(t, filepath.Join(seed, "fashion", "train", "labels", "part-0.txt"), 10, func(b []byte) { copy(b, "0123456789") })
	writeFile(t, filepath.Join(seed, "fashion", "README.md"), 5, func(b []byte) { copy(b, "skip!") })
	writeFile(t, filepath.Join(seed, "fashion", "big.bin"), bigObjectMiB<<20, func(b []byte) { _, _ = rng.Read(b) })
	writeFile(t, filepath.Join(seed, "fashion2", "sibling.bin"), 3, func(b []byte) { copy(b, "sib") })
	want, err := exec.Command("sh", "-c", "cd "+seed+"/fashion && find . -type f ! -name README.md | sort | xargs sha256sum").Output()
	if err != nil {
		t.Fatal(err)
	}
	endpoint := startS3(t, ctx, ns, server, seed)

	if err := c.Client().Create(ctx, initRuntime(ns, initializer, hostPathDir(t))); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s3-credentials"},
		StringData: map[string]string{"ACCESS_KEY_ID": "trainyard", "SECRET_ACCESS_KEY": "not-checked-by-gofakes3"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env := []corev1.EnvVar{{Name: "ENDPOINT", Value: endpoint}, {Name: "IGNORE_PATTERNS", Value: "*.md"}}
	for _, j := range []*trainer.TrainJob{
		datasetJob(ns, "fetch", "s3://data/fashion", env, "s3-credentials"),
		datasetJob(ns, "missing", "s3://data/fashion/nope.bin", env, ""),
	} {
		if err := c.Client().Create(ctx, j); err != nil {
			t.Fatal(err)
		}
	}

	if cond := waitFinished(t, ctx, ns, "fetch"); cond.Type != trainer.TrainJobComplete {
		t.Fatalf("fetch: %s %s: %s\ninitializer log:\n%s", cond.Type, cond.Reason, cond.Message,
			containerLog(t, ctx, ns, "fetch", "dataset-initializer", "dataset-initializer"))
	}
	iniLog := containerLog(t, ctx, ns, "fetch", "dataset-initializer", "dataset-initializer")
	if got := containerLog(t, ctx, ns, "fetch", "node", "node"); got != string(want) {
		t.Errorf("the node sees (sha256sum):\n%s\nwant:\n%s\ninitializer log:\n%s", got, want, iniLog)
	}
	m := doneRE.FindStringSubmatch(iniLog)
	if m == nil || m[1] != "3" {
		t.Fatalf("no summary of 3 files in the initializer log:\n%s", iniLog)
	}
	if !strings.Contains(iniLog, "big.bin: 200.0 MiB") {
		t.Errorf("no line for big.bin in the initializer log:\n%s", iniLog)
	}
	secs, _ := strconv.ParseFloat(m[2], 64)
	t.Logf("initializer: %d MiB and 2 small files from the S3 server in %.1fs, %s MB/s (its log's summary)", bigObjectMiB, secs, m[3])

	cond := waitFinished(t, ctx, ns, "missing")
	missingLog := containerLog(t, ctx, ns, "missing", "dataset-initializer", "dataset-initializer")
	if cond.Type != trainer.TrainJobFailed {
		t.Fatalf("missing: %s %s: %s, want Failed", cond.Type, cond.Reason, cond.Message)
	}
	wantMsg := "dataset initializer failed: s3://data/fashion/nope.bin: no such object or prefix at " + endpoint
	if !strings.Contains(missingLog, wantMsg) {
		t.Errorf("initializer log lacks %q:\n%s", wantMsg, missingLog)
	}
	if got := terminationMessage(t, ctx, ns, "missing", "dataset-initializer"); !strings.Contains(got, wantMsg) {
		t.Errorf("the initializer pod's termination message %q lacks %q", got, wantMsg)
	}
	t.Logf("missing key: TrainJob %s (%s: %s); initializer: %s", cond.Type, cond.Reason, cond.Message, strings.TrimSpace(missingLog))
}

// TestInitializerFileFashionMNIST runs the shipped local runtime
// (examples/fashion-mnist/runtime.yaml, its initializer command pointed at the
// binary under test): the dataset initializer delivers Debian's Fashion-MNIST
// through file:// into the shared volume, and code in the node's working
// directory opens datasets.FashionMNIST("./data", download=True) without
// downloading anything.
func TestInitializerFileFashionMNIST(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	createFashionRuntime(t, ctx, "fashion-mnist-under-test")

	ns, name := "default", "fashion-data"
	t.Cleanup(func() { _ = os.RemoveAll(filepath.Join(c.ProcessHostPathRoot(), ns+"_"+name)) })
	job := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: "fashion-mnist-under-test"},
			Trainer: &trainer.Trainer{Command: []string{"/usr/bin/python3", "-c",
				`import os; from torchvision import datasets; d = datasets.FashionMNIST("./data", train=True, download=True); t = datasets.FashionMNIST("./data", train=False); print("cwd", os.getcwd(), "train", len(d), "test", len(t), "raw", sorted(os.listdir("data/FashionMNIST/raw")))`}},
		},
	}
	if err := c.Client().Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Client().Delete(context.Background(), job) })
	cond := waitFinished(t, ctx, ns, name)
	iniLog := containerLog(t, ctx, ns, name, "dataset-initializer", "dataset-initializer")
	nodeLog := containerLog(t, ctx, ns, name, "node", "node")
	if cond.Type != trainer.TrainJobComplete {
		t.Fatalf("%s %s: %s\ninitializer:\n%s\nnode:\n%s", cond.Type, cond.Reason, cond.Message, iniLog, nodeLog)
	}
	want := "cwd /workspace/dataset train 60000 test 10000 raw ['t10k-images-idx3-ubyte', 't10k-labels-idx1-ubyte', 'train-images-idx3-ubyte', 'train-labels-idx1-ubyte']"
	if !strings.Contains(nodeLog, want) || strings.Contains(nodeLog, "Downloading") {
		t.Errorf("node log:\n%s\nwant %q and no download", nodeLog, want)
	}
	if !strings.Contains(iniLog, "done: 4 files") || !strings.Contains(iniLog, "decompressed train-images-idx3-ubyte (44.9 MiB)") {
		t.Errorf("initializer log:\n%s", iniLog)
	}
}

// createFashionRuntime installs the shipped local runtime
// (examples/fashion-mnist/runtime.yaml) as the ClusterTrainingRuntime name, its
// initializer command pointed at the binary under test and its hostPath at the
// cluster's host path root, as the local cluster installs it (localcluster: the
// root is in the state directory); skips the test without Debian's Fashion-MNIST
// and torchvision.
func createFashionRuntime(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	_, err := os.Stat("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")
	prereq.Require(t, err == nil, "Debian's dataset-fashion-mnist is not installed: run `make debian-packages` (make run installs it too)")
	prereq.Require(t, exec.Command("/usr/bin/python3", "-c", "import torchvision").Run() == nil,
		"/usr/bin/python3 cannot import torchvision (Debian's python3-torchvision): run `make debian-packages` (make run installs it too)")
	initializer, _ := buildInitializer(t)
	// Its hostPath in the cluster's host path root, as the local cluster
	// installs it (localcluster: the root is in the state directory).
	raw, err := os.ReadFile(filepath.Join(repo, "examples", "fashion-mnist", "runtime.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	yamlFile := filepath.Join(t.TempDir(), "runtime.yaml")
	if err := os.WriteFile(yamlFile, []byte(strings.ReplaceAll(string(raw), "path: /var/tmp/trainyard-initializer\n", "path: "+c.ProcessHostPathRoot()+"\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	rt := loadYAML(t, yamlFile)
	jobs, _, _ := unstructured.NestedSlice(rt.Object, "spec", "template", "spec", "replicatedJobs")
	ini := jobs[0].(map[string]any)
	containers, _, _ := unstructured.NestedSlice(ini, "template", "spec", "template", "spec", "containers")
	containers[0].(map[string]any)["command"] = []any{initializer, "dataset"}
	if err := unstructured.SetNestedSlice(ini, containers, "template", "spec", "template", "spec", "containers"); err != nil {
		t.Fatal(err)
	}
	jobs[0] = ini
	if err := unstructured.SetNestedSlice(rt.Object, jobs, "spec", "template", "spec", "replicatedJobs"); err != nil {
		t.Fatal(err)
	}
	rt.SetName(name)
	if err := c.Client().Create(ctx, rt); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Client().Delete(context.Background(), rt) })
}

func loadYAML(t *testing.T, path string) *unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(raw)), 4096).Decode(&u.Object); err != nil {
		t.Fatalf("decoding %s: %v", path, err)
	}
	return u
}
