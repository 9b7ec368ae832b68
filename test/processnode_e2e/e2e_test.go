// Package processnode_e2e trains examples/mnist (its TrainJob on torch-distributed,
// its elastic TrainJob on its own TrainingRuntime and, in pytorchjob_test.go, the
// PyTorchJobs of examples/pytorchjob) and, in xgboost_test.go, examples/xgboost
// (on xgboost-distributed) and, in optimization_test.go, the OptimizationJob of
// examples/fashion-mnist-tuning for real through the whole stack:
// a TrainJob created through the API server, resolved by the Trainyard manager into
// a JobSet, whose pods the JobSet and Job controllers create and the scheduler binds
// to a process node (cmd/trainyard-node), which runs torchrun in each pod's own
// namespaces. The logs are read through the API server (kubectl logs), which reaches
// the process node's kubelet API. gpu_test.go gives pods the GPUs that a fake
// nvidia-smi (testdata/nvidia-smi) lists to the process node.
//
// Needs root, the local cluster binaries (make cluster-tools) and Debian's
// python3-torch (make run installs it); skipped otherwise, and failed under
// CI=true (test/prereq).
package processnode_e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/localcluster"
	"github.com/trainyard/trainyard/pkg/processnode"
	trruntime "github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/test/e2eutil"
	"github.com/trainyard/trainyard/test/prereq"
)

var (
	c    *localcluster.Cluster
	cs   kubernetes.Interface
	repo string
)

func TestMain(m *testing.M) {
	wd, _ := os.Getwd()
	var err error
	if repo, err = localcluster.FindRepoDir(wd); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	o := localcluster.Options{
		ProcessNodes: 1,
		Runtimes: []string{
			filepath.Join(repo, "runtimes", "torch-distributed.yaml"),
			filepath.Join(repo, "runtimes", "xgboost-distributed.yaml"),
			filepath.Join(repo, "runtimes", "mpi-distributed.yaml"),       // mpi_test.go
			filepath.Join(repo, "runtimes", "torch-distributed-gpu.yaml"), // gpu_test.go
		},
		// The default, said explicitly: pytorchjob_test.go runs kubeflow.org/v1 PyTorchJobs.
		ManagerArgs: []string{"--enable-pytorchjob=true"},
		// Two GPUs that are not there, for gpu_test.go.
		ProcessNodeNvidiaSMI: filepath.Join(repo, "test", "processnode_e2e", "testdata", "nvidia-smi"),
	}
	missing, err := localcluster.MissingBinaries(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	const suite = "processnode e2e"
	prereq.MainRequire(suite, len(missing) == 0, "local cluster binaries missing (run `make cluster-tools`): "+strings.Join(missing, ", "))
	prereq.MainRequire(suite, os.Geteuid() == 0, "needs root (the process node gives each pod its own namespaces): run the tests as root")
	prereq.MainRequire(suite, exec.Command("/usr/bin/python3", "-c", "import torch").Run() == nil,
		"/usr/bin/python3 cannot import torch (install Debian's python3-torch: run `make debian-packages`, as `make run` does)")
	if c, err = e2eutil.UpCluster("processnode", o); err != nil {
		fmt.Fprintln(os.Stderr, "processnode e2e:", err)
		os.Exit(1)
	}
	if cs, err = kubernetes.NewForConfig(c.RESTConfig()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pods, stopPods, err := watchPodUIDs(cs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "processnode e2e:", err)
		_ = c.Down()
		os.Exit(1)
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "processnode e2e: logs of every component are in %s\n", c.Logs())
	}
	stopPods() // every pod of the suite was seen; the API server goes now
	if err := c.Down(); err != nil {
		fmt.Fprintln(os.Stderr, "processnode e2e: stopping the cluster:", err)
		code = 1
	}
	// The agent removed everything it created on the host.
	if bridge := processnode.DefaultBridge(c.StateDir()); linkExists(bridge) {
		fmt.Fprintf(os.Stderr, "processnode e2e: bridge %s is still there after Down\n", bridge)
		code = 1
	}
	// Only this cluster's: another cluster on the host (another suite, a
	// `trainyard-local up`) has veths named alike, on its own bridge.
	var veths []string
	for _, uid := range pods.list() {
		if v := processnode.VethName(uid); linkExists(v) {
			veths = append(veths, v)
		}
	}
	if len(veths) > 0 {
		fmt.Fprintf(os.Stderr, "processnode e2e: veths of this cluster's pods left after Down: %v\n", veths)
		code = 1
	}
	if code == 0 {
		_ = os.RemoveAll(c.StateDir())
	}
	os.Exit(code)
}

// podUIDs are the UIDs of every pod the cluster has had.
type podUIDs struct {
	mu   sync.Mutex
	uids map[types.UID]bool
}

func (p *podUIDs) add(obj interface{}) {
	if pod, ok := obj.(*corev1.Pod); ok {
		p.mu.Lock()
		p.uids[pod.UID] = true
		p.mu.Unlock()
	}
}

func (p *podUIDs) list() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var l []string
	for uid := range p.uids {
		l = append(l, string(uid))
	}
	sort.Strings(l)
	return l
}

// watchPodUIDs records the UID of every pod of the cluster, in every
// namespace, from now until stop is called: the process node names each
// pod's veth after its UID (processnode.VethName), so the check after Down
// looks for this cluster's veths only.
func watchPodUIDs(cs kubernetes.Interface) (*podUIDs, func(), error) {
	p := &podUIDs{uids: map[types.UID]bool{}}
	factory := informers.NewSharedInformerFactory(cs, 0)
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    p.add,
		UpdateFunc: func(_, obj interface{}) { p.add(obj) },
	}); err != nil {
		return nil, nil, err
	}
	stopCh := make(chan struct{})
	factory.Start(stopCh)
	for typ, ok := range factory.WaitForCacheSync(stopCh) {
		if !ok {
			close(stopCh)
			return nil, nil, fmt.Errorf("watching pods: %v not synced", typ)
		}
	}
	var once sync.Once
	return p, func() { once.Do(func() { close(stopCh); factory.Shutdown() }) }, nil
}

func linkExists(name string) bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", name))
	return err == nil
}

// createNamespace creates namespace ns of a test.
func createNamespace(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// createMNIST creates the example's ConfigMap (from mnist.py, as its
// kustomization does) and its TrainJob, renamed, in namespace ns.
func createMNIST(t *testing.T, ctx context.Context, ns string, names ...string) {
	t.Helper()
	createMNISTScript(t, ctx, ns)
	u := loadMNISTExample(t, "trainjob.yaml")
	for _, name := range names {
		job := u.DeepCopy()
		job.SetName(name)
		job.SetNamespace(ns)
		if err := c.Client().Create(ctx, job); err != nil {
			t.Fatalf("creating TrainJob %s: %v", name, err)
		}
	}
}

// createMNISTScript creates namespace ns and in it the ConfigMap mnist-script
// with examples/mnist/mnist.py.
func createMNISTScript(t *testing.T, ctx context.Context, ns string) {
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
}

// loadMNISTExample decodes the object of examples/mnist/<file>.
func loadMNISTExample(t *testing.T, file string) *unstructured.Unstructured {
	t.Helper()
	return loadExample(t, "mnist", file)
}

// loadExample decodes the object of examples/<dir>/<file>.
func loadExample(t *testing.T, dir, file string) *unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repo, "examples", dir, file))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096).Decode(&u.Object); err != nil {
		t.Fatalf("decoding %s: %v", file, err)
	}
	return u
}

// waitFinished waits until the TrainJob is Complete or Failed and returns that condition.
func waitFinished(t *testing.T, ctx context.Context, ns, name string) metav1.Condition {
	t.Helper()
	return e2eutil.WaitFinished(ctx, t, c.Client(), client.ObjectKey{Namespace: ns, Name: name})
}

// podLogs returns the logs of the job's pods by node rank, read through the API
// server as kubectl logs does.
func podLogs(t *testing.T, ctx context.Context, ns, job string) map[string]string {
	t.Helper()
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "jobset.sigs.k8s.io/jobset-name=" + job})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		b, err := cs.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: "node"}).DoRaw(ctx)
		if err != nil {
			t.Fatalf("logs of %s: %v", p.Name, err)
		}
		out[p.Annotations["batch.kubernetes.io/job-completion-index"]] = string(b)
	}
	return out
}

var resultRE = regexp.MustCompile(`MNIST_RESULT rank=(\d+) world_size=(\d+) .*first_loss=([0-9.]+) last_loss=([0-9.]+) first_loss_mean=([0-9.]+) last_loss_mean=([0-9.]+)`)

// checkTrained asserts from the logs that both ranks saw WORLD_SIZE=2, used the
// JobSet's master address and port 29500, and that the loss fell by at least half.
func checkTrained(t *testing.T, job string, logs map[string]string) {
	t.Helper()
	if len(logs) != 2 {
		t.Fatalf("%s: logs of %d pods, want 2", job, len(logs))
	}
	for rank, l := range logs {
		if !strings.Contains(l, "WORLD_SIZE=2 ") || !strings.Contains(l, "world_size=2 ") {
			t.Errorf("%s rank %s did not see WORLD_SIZE=2:\n%s", job, rank, l)
		}
		if want := fmt.Sprintf("MASTER_ADDR=%s-node-0-0.%s MASTER_PORT=29500", job, job); !strings.Contains(l, want) {
			t.Errorf("%s rank %s: no %q in the logs:\n%s", job, rank, want, l)
		}
		m := resultRE.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("%s rank %s: no MNIST_RESULT line:\n%s", job, rank, l)
			continue
		}
		if m[1] != rank {
			t.Errorf("%s: pod of node rank %s ran as rank %s", job, rank, m[1])
		}
		first, _ := strconv.ParseFloat(m[3], 64)
		last, _ := strconv.ParseFloat(m[4], 64)
		firstMean, _ := strconv.ParseFloat(m[5], 64)
		lastMean, _ := strconv.ParseFloat(m[6], 64)
		t.Logf("%s rank %s: WORLD_SIZE=%s, loss %.4f -> %.4f (all ranks %.4f -> %.4f)", job, rank, m[2], first, last, firstMean, lastMean)
		if !(last <= first/2) || !(lastMean <= firstMean/2) {
			t.Errorf("%s rank %s: loss did not fall by half: %.4f -> %.4f (all ranks %.4f -> %.4f)", job, rank, first, last, firstMean, lastMean)
		}
	}
}

// TestMNIST trains the example on two nodes and follows a node's log while it
// trains, as `kubectl logs -f` does.
func TestMNIST(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const ns, job = "mnist-e2e", "mnist"
	createMNIST(t, ctx, ns, job)

	// Follow node 1 from the moment its container runs.
	followed := make(chan string, 1)
	go func() {
		followed <- followNode(ctx, ns, job, "1")
	}()
	cond := waitFinished(t, ctx, ns, job)
	if cond.Type != "Complete" {
		t.Fatalf("TrainJob %s: %s/%s: %s", job, cond.Type, cond.Reason, cond.Message)
	}
	logs := podLogs(t, ctx, ns, job)
	checkTrained(t, job, logs)
	select {
	case f := <-followed:
		if !strings.Contains(f, "MNIST_RESULT rank=1") {
			t.Errorf("the followed log stream of node 1 ended without the result line:\n%s", f)
		}
	case <-time.After(30 * time.Second):
		t.Error("the followed log stream did not end with the container")
	}
}

// followNode streams the log of the pod of node rank as soon as it runs, until the
// stream ends.
func followNode(ctx context.Context, ns, job, rank string) string {
	for ctx.Err() == nil {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "jobset.sigs.k8s.io/jobset-name=" + job})
		if err == nil {
			for _, p := range pods.Items {
				if p.Annotations["batch.kubernetes.io/job-completion-index"] != rank || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Running == nil {
					continue
				}
				rc, err := cs.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: "node", Follow: true}).Stream(ctx)
				if err != nil {
					return "stream: " + err.Error()
				}
				var b strings.Builder
				sc := bufio.NewScanner(rc)
				for sc.Scan() {
					b.WriteString(sc.Text() + "\n")
				}
				_ = rc.Close()
				return b.String()
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return ""
}

// TestTwoTrainJobsAtOnce runs two TrainJobs side by side on the one process node:
// both masters listen on port 29500, each in its own pod network namespace.
func TestTwoTrainJobsAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	const ns = "mnist-pair"
	jobs := []string{"mnist-a", "mnist-b"}
	createMNIST(t, ctx, ns, jobs...)

	// Both run at the same time: all four pods are Running at one moment.
	if err := waitAllRunning(ctx, ns, 4); err != nil {
		t.Error(err)
	}
	var wg sync.WaitGroup
	for _, job := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cond := waitFinished(t, ctx, ns, job)
			if cond.Type != "Complete" {
				t.Errorf("TrainJob %s: %s/%s: %s", job, cond.Type, cond.Reason, cond.Message)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	ips := map[string]string{}
	for _, job := range jobs {
		checkTrained(t, job, podLogs(t, ctx, ns, job))
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "jobset.sigs.k8s.io/jobset-name=" + job})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			if other, dup := ips[p.Status.PodIP]; dup {
				t.Errorf("pods %s and %s share the address %s", other, p.Name, p.Status.PodIP)
			}
			ips[p.Status.PodIP] = p.Name
		}
	}
}

func waitAllRunning(ctx context.Context, ns string, n int) error {
	deadline := time.Now().Add(2 * time.Minute)
	var last string
	for time.Now().Before(deadline) && ctx.Err() == nil {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		running := 0
		var phases []string
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
			phases = append(phases, p.Name+"="+string(p.Status.Phase))
		}
		if running >= n {
			return nil
		}
		last = strings.Join(phases, " ")
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("the pods of both TrainJobs were never all Running at once: " + last)
}

// TestTrainJobElastic trains examples/mnist/trainjob-elastic.yaml on the
// TrainingRuntime of examples/mnist/elastic-runtime.yaml (mlPolicy.torch
// .elasticPolicy, 2 to 3 nodes): three pods run torchrun with the PET_NNODES=2:3,
// PET_RDZV_BACKEND=c10d and PET_RDZV_ENDPOINT Trainyard sets, no node rank and
// no master address. The endpoint is node 0's fully qualified name, which every
// pod resolves and which node 0's agent recognises as its own (the canonical
// name of its host name), so that agent hosts the rendezvous; the rendezvous
// forms one world of 3 and assigns the ranks 0, 1, 2. With an endpoint no agent
// recognises (<job>-node-0-0.<job>, what Trainyard set before) no agent hosts
// the store and the run never trains.
func TestTrainJobElastic(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	const ns = "mnist-elastic-e2e"
	createMNISTScript(t, ctx, ns)
	rt := loadMNISTExample(t, "elastic-runtime.yaml")
	rt.SetNamespace(ns)
	if err := c.Client().Create(ctx, rt); err != nil {
		t.Fatalf("creating TrainingRuntime %s: %v", rt.GetName(), err)
	}
	job := loadMNISTExample(t, "trainjob-elastic.yaml")
	job.SetNamespace(ns)
	start := time.Now()
	if err := c.Client().Create(ctx, job); err != nil {
		t.Fatalf("creating TrainJob %s: %v", job.GetName(), err)
	}
	name := job.GetName()
	// Followed from the start: a JobSet that fails deletes its unfinished pods.
	follower := followPods(ctx, ns, "jobset.sigs.k8s.io/jobset-name="+name, "node", func(r replicaLog) string {
		return "node " + r.pod.Annotations["batch.kubernetes.io/job-completion-index"]
	})

	// A run trains in well under a minute here; one whose rendezvous never forms
	// would retry until its Job gives up: do not wait longer than 3 minutes.
	cond, finished := waitFinishedWithin(ctx, ns, name, 3*time.Minute)
	took := time.Since(start)
	if !finished {
		// Stop it, so that its pods end (and their log streams with them) and do
		// not load the machine for the tests that follow.
		if err := c.Client().Delete(ctx, job); err != nil {
			t.Logf("deleting TrainJob %s: %v", name, err)
		}
	}
	logs := follower.wait(t, ctx)
	if !finished || cond.Type != "Complete" {
		for who, rl := range logs {
			t.Logf("%s (pod %s):\n%s", who, rl.pod.Name, rl.log)
		}
		if !finished {
			t.Fatalf("TrainJob %s not finished %s after it was created", name, took.Round(time.Second))
		}
		t.Fatalf("TrainJob %s: %s/%s: %s (%s after it was created)", name, cond.Type, cond.Reason, cond.Message, took.Round(time.Second))
	}
	t.Logf("TrainJob %s Complete %.1fs after it was created", name, took.Seconds())

	if len(logs) != 3 {
		t.Fatalf("logs of %d pods, want 3 (numNodes)", len(logs))
	}
	wantEnv := map[string]string{
		"PET_NNODES":        "2:3",
		"PET_RDZV_BACKEND":  "c10d",
		"PET_RDZV_ENDPOINT": fmt.Sprintf("%s-node-0-0.%s.%s.svc.%s:29500", name, name, ns, trruntime.DefaultClusterDomain),
		"PET_RDZV_ID":       name,
	}
	ranks := map[int]string{}
	for i := range 3 {
		idx := strconv.Itoa(i)
		who := "node " + idx
		rl, ok := logs[who]
		if !ok {
			t.Errorf("no pod for %s", who)
			continue
		}
		env := map[string]string{}
		for _, e := range rl.pod.Spec.Containers[0].Env {
			env[e.Name] = e.Value
		}
		for k, want := range wantEnv {
			if env[k] != want {
				t.Errorf("%s: %s=%q, want %q", who, k, env[k], want)
			}
		}
		for _, k := range []string{"PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"} {
			if v, ok := env[k]; ok {
				t.Errorf("%s: %s=%q, want none (the rendezvous assigns ranks and the master)", who, k, v)
			}
		}
		// The world the rendezvous formed, as torchrun's agent logged it (the
		// last one, should it have formed more than one).
		worlds := rdzvWorldRE.FindAllStringSubmatch(rl.log, -1)
		if len(worlds) == 0 {
			t.Errorf("%s: torchrun logged no rendezvous result:\n%s", who, rl.log)
			continue
		}
		formed := worlds[len(worlds)-1][1]
		r, ok := parseMNIST(t, who, rl.log)
		if !ok {
			continue
		}
		t.Logf("%s (pod %s, host %s): rendezvous formed group_world_size=%s (%d rendezvous), rank %d of %d, WORLD_SIZE=%s, MASTER_ADDR=%s:%s, loss %.4f -> %.4f (all ranks %.4f -> %.4f), training %.1fs",
			who, rl.pod.Name, r.host, formed, len(worlds), r.rank, r.world, r.envWorld, r.addr, r.port, r.first, r.last, r.firstMean, r.lastMean, r.seconds)
		if formed != "3" || r.world != 3 || r.envWorld != "3" {
			t.Errorf("%s: rendezvous formed a world of %s, the process group has %d ranks, WORLD_SIZE=%s; want 3 (all nodes)", who, formed, r.world, r.envWorld)
		}
		if want := name + "-node-0-" + idx; r.host != want {
			t.Errorf("%s: host name %s, want %s", who, r.host, want)
		}
		if other, dup := ranks[r.rank]; dup {
			t.Errorf("%s and %s both ran as rank %d", other, who, r.rank)
		}
		ranks[r.rank] = who
		checkLossHalved(t, who, r)
	}
	for r := range 3 {
		if _, ok := ranks[r]; !ok {
			t.Errorf("no node ran as rank %d (ranks: %v)", r, ranks)
		}
	}
}

// waitFinishedWithin waits up to d until the TrainJob is Complete or Failed and
// returns that condition, or false when it did not finish in time.
func waitFinishedWithin(ctx context.Context, ns, name string, d time.Duration) (metav1.Condition, bool) {
	end := time.Now().Add(d)
	for time.Now().Before(end) && ctx.Err() == nil {
		var job trainer.TrainJob
		if err := c.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &job); err == nil {
			if cond, ok := e2eutil.Finished(&job); ok {
				return cond, true
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	return metav1.Condition{}, false
}
