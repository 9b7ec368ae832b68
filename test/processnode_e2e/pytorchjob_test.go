package processnode_e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/localcluster"
)

// The legacy kubeflow.org/v1 PyTorchJobs of examples/pytorchjob train for real
// on the process node: a v1-style script (env:// init from MASTER_ADDR,
// MASTER_PORT, WORLD_SIZE, RANK; no torchrun) on a Master and two Workers, and
// an elastic job whose torchrun agents form a c10d rendezvous hosted by worker 0.

// pytorchJobClient is a client that also knows kubeflow.org/v1.
func pytorchJobClient(t *testing.T) client.Client {
	t.Helper()
	s := localcluster.Scheme()
	utilruntime.Must(kubeflowv1.AddToScheme(s))
	cl, err := client.New(c.RESTConfig(), client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// createPyTorchJobExample creates namespace ns, the ConfigMap mnist-script from
// examples/mnist/mnist.py (as the example's instructions do with kubectl create
// configmap) and the PyTorchJob of the example file, unchanged.
func createPyTorchJobExample(t *testing.T, ctx context.Context, cl client.Client, ns, file string) *kubeflowv1.PyTorchJob {
	t.Helper()
	createNamespace(t, ctx, ns)
	script, err := os.ReadFile(filepath.Join(repo, "examples", "mnist", "mnist.py"))
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "mnist-script", Namespace: ns}, Data: map[string]string{"mnist.py": string(script)}}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(repo, "examples", "pytorchjob", file))
	if err != nil {
		t.Fatal(err)
	}
	job := &kubeflowv1.PyTorchJob{}
	if err := yaml.UnmarshalStrict(raw, job); err != nil {
		t.Fatalf("decoding %s: %v", file, err)
	}
	job.Namespace = ns
	if err := cl.Create(ctx, job); err != nil {
		t.Fatalf("creating PyTorchJob %s: %v", job.Name, err)
	}
	return job
}

// waitPyTorchJobFinished waits until the job is Succeeded or Failed, or until
// deadline, and returns that condition type (or "" when it did not finish) and
// a message.
func waitPyTorchJobFinished(t *testing.T, ctx context.Context, cl client.Client, ns, name string, deadline time.Duration) (kubeflowv1.JobConditionType, string) {
	t.Helper()
	var job kubeflowv1.PyTorchJob
	end := time.Now().Add(deadline)
	for {
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &job); err != nil && ctx.Err() == nil {
			t.Logf("reading PyTorchJob %s: %v", name, err)
		}
		for _, cond := range job.Status.Conditions {
			if (cond.Type == kubeflowv1.JobSucceeded || cond.Type == kubeflowv1.JobFailed) && cond.Status == corev1.ConditionTrue {
				return cond.Type, cond.Message
			}
		}
		if time.Now().After(end) || ctx.Err() != nil {
			return "", fmt.Sprintf("not finished after %s; status %+v", deadline, job.Status)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// replicaLog is what a pod of a replica printed, and the pod as it ran.
type replicaLog struct {
	pod corev1.Pod
	log string
}

// replica is <type>-<index> of a pod, e.g. master-0, worker-1.
func (r replicaLog) replica() string {
	return r.pod.Labels[kubeflowv1.ReplicaTypeLabel] + "-" + r.pod.Labels[kubeflowv1.ReplicaIndexLabel]
}

// logFollower streams one container's log of every pod of a job from the
// moment it runs, through the API server (kubectl logs -f). Following matters:
// once a PyTorchJob's Master succeeds, or a JobSet fails, the JobSet is done and
// deletes the Jobs that have not finished, and their pods, logs and all.
type logFollower struct {
	container string
	key       func(replicaLog) string // names a pod in what wait returns
	mu        sync.Mutex
	logs      map[string]*replicaLog // pod UID -> log so far
	streams   sync.WaitGroup
	stop      chan struct{}
	done      chan struct{}
}

// followPyTorchJob follows the pytorch containers of a PyTorchJob, by replica
// (master-0, worker-0, ...).
func followPyTorchJob(ctx context.Context, ns, job string) *logFollower {
	return followPods(ctx, ns, kubeflowv1.JobNameLabel+"="+job, kubeflowv1.PyTorchJobDefaultContainerName, replicaLog.replica)
}

// followPods follows the container of every pod that matches the label selector.
func followPods(ctx context.Context, ns, selector, container string, key func(replicaLog) string) *logFollower {
	f := &logFollower{container: container, key: key, logs: map[string]*replicaLog{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(f.done)
		for {
			pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
			if err == nil {
				for _, p := range pods.Items {
					f.maybeFollow(ctx, p)
				}
			}
			select {
			case <-f.stop:
				return
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return f
}

func (f *logFollower) maybeFollow(ctx context.Context, p corev1.Pod) {
	started := false
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == f.container && (s.State.Running != nil || s.State.Terminated != nil) {
			started = true
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.logs[string(p.UID)]; ok || !started {
		return
	}
	rl := &replicaLog{pod: p}
	f.logs[string(p.UID)] = rl
	f.streams.Add(1)
	go func() {
		defer f.streams.Done()
		rc, err := cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: f.container, Follow: true}).Stream(ctx)
		if err != nil {
			f.mu.Lock()
			rl.log = "stream: " + err.Error()
			f.mu.Unlock()
			return
		}
		defer func() { _ = rc.Close() }()
		sc := bufio.NewScanner(rc)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			f.mu.Lock()
			rl.log += sc.Text() + "\n"
			f.mu.Unlock()
		}
	}()
}

// wait stops looking for new pods, waits for the streams to end (their
// containers have ended) and returns the logs by the follower's key.
// A pod that still exists is read once more without following, so that a
// stream cut short loses nothing.
func (f *logFollower) wait(t *testing.T, ctx context.Context) map[string]replicaLog {
	t.Helper()
	close(f.stop)
	<-f.done
	ended := make(chan struct{})
	go func() { f.streams.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(time.Minute):
		t.Error("the log streams did not end within a minute of the job's end")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]replicaLog{}
	for _, rl := range f.logs {
		b, err := cs.CoreV1().Pods(rl.pod.Namespace).GetLogs(rl.pod.Name, &corev1.PodLogOptions{Container: f.container}).DoRaw(ctx)
		if err == nil && len(b) >= len(rl.log) {
			rl.log = string(b)
		}
		k := f.key(*rl)
		if prev, dup := out[k]; dup {
			t.Errorf("%s ran in two pods, %s and %s", k, prev.pod.Name, rl.pod.Name)
		}
		out[k] = *rl
	}
	return out
}

var (
	mnistStartRE  = regexp.MustCompile(`MNIST rank=(\d+) world_size=(\d+) WORLD_SIZE=(\S+) RANK=(\S+) MASTER_ADDR=(\S+) MASTER_PORT=(\S+) hostname=(\S+)`)
	mnistResultRE = regexp.MustCompile(`MNIST_RESULT rank=(\d+) world_size=(\d+) steps=(\d+) first_loss=([0-9.]+) last_loss=([0-9.]+) first_loss_mean=([0-9.]+) last_loss_mean=([0-9.]+) params_equal=(\w+) seconds=([0-9.]+) ok=(\w+)`)
	rdzvWorldRE   = regexp.MustCompile(`group_world_size=(\d+)`)
)

// mnistRun is what one rank of examples/mnist/mnist.py reported.
type mnistRun struct {
	rank, world                         int
	envWorld, envRank, addr, port, host string
	first, last, firstMean, lastMean    float64
	seconds                             float64
	paramsEqual, ok                     bool
}

func parseMNIST(t *testing.T, who, log string) (mnistRun, bool) {
	t.Helper()
	start := mnistStartRE.FindStringSubmatch(log)
	// The last result line: an elastic run may have restarted its workers.
	results := mnistResultRE.FindAllStringSubmatch(log, -1)
	if start == nil || len(results) == 0 {
		t.Errorf("%s: no MNIST start or MNIST_RESULT line in its log:\n%s", who, log)
		return mnistRun{}, false
	}
	res := results[len(results)-1]
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	atof := func(s string) float64 { f, _ := strconv.ParseFloat(s, 64); return f }
	return mnistRun{
		rank: atoi(res[1]), world: atoi(res[2]),
		envWorld: start[3], envRank: start[4], addr: start[5], port: start[6], host: start[7],
		first: atof(res[4]), last: atof(res[5]), firstMean: atof(res[6]), lastMean: atof(res[7]),
		paramsEqual: res[8] == "True", seconds: atof(res[9]), ok: res[10] == "True",
	}, true
}

// checkLossHalved asserts that the rank's loss, and the mean over all ranks,
// fell by at least half between the first and the last 20 steps.
func checkLossHalved(t *testing.T, who string, r mnistRun) {
	t.Helper()
	if !(r.last <= r.first/2) || !(r.lastMean <= r.firstMean/2) {
		t.Errorf("%s: loss did not fall by half: %.4f -> %.4f (all ranks %.4f -> %.4f)", who, r.first, r.last, r.firstMean, r.lastMean)
	}
	if !r.paramsEqual || !r.ok {
		t.Errorf("%s: params_equal=%v ok=%v", who, r.paramsEqual, r.ok)
	}
}

// runPyTorchJobExample creates examples/pytorchjob/<file> in ns, follows its
// pods' logs and waits until it finished; it fails the test, showing the logs,
// unless the job Succeeded, and returns the job's name and its logs by replica.
func runPyTorchJobExample(t *testing.T, ns, file string) (string, map[string]replicaLog) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cl := pytorchJobClient(t)
	start := time.Now()
	job := createPyTorchJobExample(t, ctx, cl, ns, file)
	follower := followPyTorchJob(ctx, ns, job.Name)
	cond, msg := waitPyTorchJobFinished(t, ctx, cl, ns, job.Name, 4*time.Minute)
	took := time.Since(start)
	if cond == "" {
		// Still running: end it, so that the streams end and show why.
		if err := cl.Delete(ctx, job); err != nil {
			t.Logf("deleting PyTorchJob %s: %v", job.Name, err)
		}
	}
	logs := follower.wait(t, ctx)
	if cond != kubeflowv1.JobSucceeded {
		for r, l := range logs {
			t.Logf("%s (%s):\n%s", r, l.pod.Name, l.log)
		}
		t.Fatalf("PyTorchJob %s: %s: %s", job.Name, cond, msg)
	}
	t.Logf("PyTorchJob %s Succeeded %.1fs after it was created", job.Name, took.Seconds())
	return job.Name, logs
}

// TestPyTorchJobV1Script trains examples/pytorchjob/pytorch_job_mnist_cpu.yaml:
// a Master and two Workers run `python3 mnist.py`, whose init_process_group
// ("gloo") reads v1's MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK. Every rank
// reaches the Master through its Service, pytorch-mnist-cpu-master-0.
func TestPyTorchJobV1Script(t *testing.T) {
	jobName, logs := runPyTorchJobExample(t, "pytorchjob-v1", "pytorch_job_mnist_cpu.yaml")

	want := map[string]int{"master-0": 0, "worker-0": 1, "worker-1": 2} // replica -> RANK
	if len(logs) != len(want) {
		t.Fatalf("logs of %d pods (%v), want master-0, worker-0, worker-1", len(logs), replicaNames(logs))
	}
	ranks := map[int]string{}
	for replica, rank := range want {
		rl, ok := logs[replica]
		if !ok {
			t.Errorf("no pod for %s", replica)
			continue
		}
		r, ok := parseMNIST(t, replica, rl.log)
		if !ok {
			continue
		}
		t.Logf("%s (pod %s, host %s): RANK=%s WORLD_SIZE=%s MASTER_ADDR=%s:%s, loss %.4f -> %.4f (all ranks %.4f -> %.4f), %d ranks, training %.1fs",
			replica, rl.pod.Name, r.host, r.envRank, r.envWorld, r.addr, r.port, r.first, r.last, r.firstMean, r.lastMean, r.world, r.seconds)
		if r.envWorld != "3" || r.world != 3 {
			t.Errorf("%s: WORLD_SIZE=%s, process group of %d; want 3", replica, r.envWorld, r.world)
		}
		if r.envRank != strconv.Itoa(rank) || r.rank != rank {
			t.Errorf("%s: RANK=%s, rank %d in the group; want %d", replica, r.envRank, r.rank, rank)
		}
		if want := jobName + "-master-0"; r.addr != want || r.port != "23456" {
			t.Errorf("%s: MASTER_ADDR=%s MASTER_PORT=%s, want %s and 23456", replica, r.addr, r.port, want)
		}
		// v1's host name: the pod's name there, <job>-<type>-<index>.
		if want := jobName + "-" + replica; r.host != want {
			t.Errorf("%s: host name %s, want %s", replica, r.host, want)
		}
		if other, dup := ranks[r.rank]; dup {
			t.Errorf("%s and %s both ran as rank %d", other, replica, r.rank)
		}
		ranks[r.rank] = replica
		checkLossHalved(t, replica, r)
	}

	// The same job through the trainyard CLI, and the Job that
	// `kubectl logs job/<job>-master-0` reads (examples/pytorchjob/README.md).
	// Only the Master's pod and Job are sure to stay: the job succeeds with
	// the Master, and a worker still running then is stopped (its pod, and
	// once seen its Job, were gone by the time the CLI ran).
	bin := buildCLI(t)
	const ns = "pytorchjob-v1"
	out, code := runTrainyard(t, bin, ns, "wait", "pytorchjob/"+jobName, "--timeout", "1m")
	if code != 0 || !strings.Contains(out, "Succeeded") {
		t.Errorf("wait pytorchjob/%s: exit %d, want 0 and Succeeded", jobName, code)
	}
	out, code = runTrainyard(t, bin, ns, "get", "pytorchjob/"+jobName)
	if code != 0 || !strings.Contains(out, "Step: master-0, Status: Succeeded") || !strings.Contains(out, "Replicas:  Master 1, Worker 2") {
		t.Errorf("get pytorchjob/%s: exit %d, want its replicas and a step master-0 Succeeded", jobName, code)
	}
	out, code = runTrainyard(t, bin, ns, "logs", "pytorchjob/"+jobName)
	if code != 0 || !regexp.MustCompile(`(?m)^\[master-0\]: .*MNIST_RESULT rank=0 `).MatchString(out) {
		t.Errorf("logs pytorchjob/%s: exit %d, want [master-0]: lines with its result", jobName, code)
	}
	if _, err := cs.BatchV1().Jobs(ns).Get(context.Background(), jobName+"-master-0", metav1.GetOptions{}); err != nil {
		t.Errorf("the Job kubectl logs job/%s-master-0 reads: %v", jobName, err)
	}
}

// TestPyTorchJobElastic trains examples/pytorchjob/pytorch_job_elastic_mnist_cpu.yaml:
// three workers run torchrun with the PET_RDZV_* and PET_NNODES=2:3 Trainyard
// sets; the c10d rendezvous at pytorch-elastic-mnist-worker-0:23456 is hosted by
// worker 0 (its host name is the endpoint's host) and forms a world of three.
func TestPyTorchJobElastic(t *testing.T) {
	jobName, logs := runPyTorchJobExample(t, "pytorchjob-elastic", "pytorch_job_elastic_mnist_cpu.yaml")

	if len(logs) != 3 {
		t.Fatalf("logs of %d pods (%v), want worker-0, worker-1, worker-2", len(logs), replicaNames(logs))
	}
	ranks := map[int]string{}
	for i := range 3 {
		replica := fmt.Sprintf("worker-%d", i)
		rl, ok := logs[replica]
		if !ok {
			t.Errorf("no pod for %s", replica)
			continue
		}
		env := map[string]string{}
		for _, e := range rl.pod.Spec.Containers[0].Env {
			env[e.Name] = e.Value
		}
		if got, want := env["PET_RDZV_ENDPOINT"], jobName+"-worker-0:23456"; got != want {
			t.Errorf("%s: PET_RDZV_ENDPOINT=%q, want %q", replica, got, want)
		}
		if env["PET_RDZV_BACKEND"] != "c10d" || env["PET_NNODES"] != "2:3" {
			t.Errorf("%s: PET_RDZV_BACKEND=%q PET_NNODES=%q, want c10d and 2:3", replica, env["PET_RDZV_BACKEND"], env["PET_NNODES"])
		}
		// The world the rendezvous formed, as torchrun's agent logged it (the
		// last one, should it have formed more than one).
		worlds := rdzvWorldRE.FindAllStringSubmatch(rl.log, -1)
		if len(worlds) == 0 {
			t.Errorf("%s: torchrun logged no rendezvous result:\n%s", replica, rl.log)
			continue
		}
		formed := worlds[len(worlds)-1][1]
		r, ok := parseMNIST(t, replica, rl.log)
		if !ok {
			continue
		}
		t.Logf("%s (pod %s, host %s): rendezvous formed group_world_size=%s (%d rendezvous), rank %d of %d, MASTER_ADDR=%s:%s, loss %.4f -> %.4f (all ranks %.4f -> %.4f), training %.1fs",
			replica, rl.pod.Name, r.host, formed, len(worlds), r.rank, r.world, r.addr, r.port, r.first, r.last, r.firstMean, r.lastMean, r.seconds)
		if formed != "3" || r.world != 3 || r.envWorld != "3" {
			t.Errorf("%s: rendezvous formed a world of %s, the process group has %d ranks, WORLD_SIZE=%s; want 3 (all workers)", replica, formed, r.world, r.envWorld)
		}
		if want := jobName + "-" + replica; r.host != want {
			t.Errorf("%s: host name %s, want v1's %s", replica, r.host, want)
		}
		if other, dup := ranks[r.rank]; dup {
			t.Errorf("%s and %s both ran as rank %d", other, replica, r.rank)
		}
		ranks[r.rank] = replica
		checkLossHalved(t, replica, r)
	}
	for r := range 3 {
		if _, ok := ranks[r]; !ok {
			t.Errorf("no worker ran as rank %d (ranks: %v)", r, ranks)
		}
	}
}

func replicaNames(m map[string]replicaLog) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
