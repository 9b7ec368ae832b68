package logs

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

// nodePod is a pod of job's node replicated job with rank index (by label, or by
// annotation only when byAnnotation), whose node container is in state.
func nodePod(job, name, index string, byAnnotation bool, phase corev1.PodPhase, state corev1.ContainerState) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name),
			Labels: map[string]string{JobSetNameLabel: job}},
		Spec:   corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "node"}}},
		Status: corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{Name: "node", State: state}}},
	}
	if byAnnotation {
		p.Annotations = map[string]string{CompletionIndexKey: index}
	} else {
		p.Labels[CompletionIndexKey] = index
	}
	return p
}

var (
	running    = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	terminated = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}
	waiting    = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
)

func TestRank(t *testing.T) {
	cases := []struct {
		name   string
		pod    *corev1.Pod
		rank   int
		hasOne bool
	}{
		{"label", nodePod("j", "a", "3", false, "", running), 3, true},
		{"annotation", nodePod("j", "a", "12", true, "", running), 12, true},
		{"not a number", nodePod("j", "a", "x", false, "", running), 0, false},
		{"none", &corev1.Pod{}, 0, false},
	}
	for _, tc := range cases {
		r, ok := Rank(tc.pod)
		if r != tc.rank || ok != tc.hasOne {
			t.Errorf("%s: Rank = %d, %v; want %d, %v", tc.name, r, ok, tc.rank, tc.hasOne)
		}
	}
	if got := Prefix(1); got != "[node-1]: " {
		t.Errorf("Prefix(1) = %q", got)
	}
}

// collector gathers Out's lines.
type collector struct {
	mu    sync.Mutex
	lines []string
}

func (c *collector) out(l string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lines = append(c.lines, l)
}

func (c *collector) sorted() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.lines...)
}

// The fake clientset answers every log request with "fake logs".
func TestPrint(t *testing.T) {
	objs := []runtime.Object{
		nodePod("j", "j-node-0-2", "2", false, corev1.PodRunning, running),
		nodePod("j", "j-node-0-0", "0", true, corev1.PodSucceeded, terminated),
		nodePod("j", "j-node-0-1", "1", false, corev1.PodPending, waiting), // not started: skipped
		nodePod("other", "other-node-0-0", "0", false, corev1.PodRunning, running),
	}
	noContainer := nodePod("j", "j-init-0-0", "0", false, corev1.PodRunning, running)
	noContainer.Spec.Containers[0].Name = "dataset-initializer"
	objs = append(objs, noContainer)

	cases := []struct {
		node int
		want []string
		n    int
	}{
		{node: -1, want: []string{"[node-0]: fake logs", "[node-2]: fake logs"}, n: 2},
		{node: 2, want: []string{"[node-2]: fake logs"}, n: 1},
		{node: 1, want: nil, n: 0},
	}
	for _, tc := range cases {
		var c collector
		s := &Streamer{Client: fake.NewClientset(objs...), Namespace: "ns", Job: "j", Node: tc.node, Out: c.out}
		n, err := s.Print(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, c.sorted()); diff != "" || n != tc.n {
			t.Errorf("node %d: read %d pods (want %d), lines (-want +got):\n%s", tc.node, n, tc.n, diff)
		}
	}
}

// Follow streams each node's log once, and returns after finished is closed and
// the streams have ended.
func TestFollow(t *testing.T) {
	cs := fake.NewClientset(
		nodePod("j", "j-node-0-0", "0", false, corev1.PodSucceeded, terminated),
		nodePod("j", "j-node-0-1", "1", false, corev1.PodSucceeded, terminated),
		nodePod("j", "j-node-0-2", "2", false, corev1.PodPending, waiting),
	)
	var c collector
	s := &Streamer{Client: cs, Namespace: "ns", Job: "j", Node: -1, Out: c.out}
	finished := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Follow(context.Background(), finished, time.Second)
	}()
	time.Sleep(4 * pollInterval)
	close(finished)
	// node 2 never starts: its follower waits until the drain time cuts it off.
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Follow did not return")
	}
	got := c.sorted()
	if len(got) != 2 || !contains(got, "[node-0]: fake logs") || !contains(got, "[node-1]: fake logs") {
		t.Errorf("lines = %q, want node 0 and node 1 once each", got)
	}
}

// Follow of a job that is already finished still reads what is there.
func TestFollowFinishedJob(t *testing.T) {
	cs := fake.NewClientset(nodePod("j", "j-node-0-0", "0", false, corev1.PodSucceeded, terminated))
	var c collector
	s := &Streamer{Client: cs, Namespace: "ns", Job: "j", Node: -1, Out: c.out}
	finished := make(chan struct{})
	close(finished)
	s.Follow(context.Background(), finished, 5*time.Second)
	if diff := cmp.Diff([]string{"[node-0]: fake logs"}, c.sorted()); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

// With Name, the Streamer reads the pods it names (a PyTorchJob's replicas),
// in its order, from the pods of Selector and their container Container.
func TestPrintNamedPods(t *testing.T) {
	replica := func(name, rtype, index string, phase corev1.PodPhase, state corev1.ContainerState) *corev1.Pod {
		p := nodePod("pj", name, "", false, phase, state)
		p.Labels = map[string]string{"training.kubeflow.org/job-name": "pj", "training.kubeflow.org/replica-type": rtype,
			"training.kubeflow.org/replica-index": index}
		p.Spec.Containers[0].Name = "pytorch"
		p.Status.ContainerStatuses[0].Name = "pytorch"
		return p
	}
	objs := []runtime.Object{
		replica("pj-worker-1-0-abcde", "worker", "1", corev1.PodRunning, running),
		replica("pj-master-0-fghij", "master", "0", corev1.PodRunning, running),
		replica("pj-worker-0-0-klmno", "worker", "0", corev1.PodSucceeded, terminated),
		replica("pj-worker-2-0-pqrst", "worker", "2", corev1.PodPending, waiting), // not started: skipped
		replica("other-master-0-uvwxy", "master", "0", corev1.PodRunning, running),
	}
	objs[4].(*corev1.Pod).Labels["training.kubeflow.org/job-name"] = "other"
	name := func(p *corev1.Pod) (string, int, bool) {
		order := map[string]int{"master": 0, "worker": 100}[p.Labels["training.kubeflow.org/replica-type"]]
		i := p.Labels["training.kubeflow.org/replica-index"]
		return p.Labels["training.kubeflow.org/replica-type"] + "-" + i, order + int(i[0]-'0'), true
	}
	var c collector
	s := &Streamer{Client: fake.NewClientset(objs...), Namespace: "ns", Job: "pj", Kind: "PyTorchJob",
		Selector: "training.kubeflow.org/job-name=pj", Container: "pytorch", Name: name, Out: c.out}
	n, err := s.Print(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"[master-0]: fake logs", "[worker-0]: fake logs", "[worker-1]: fake logs"}
	if diff := cmp.Diff(want, c.sorted()); diff != "" || n != 3 {
		t.Errorf("read %d pods (want 3), lines (-want +got):\n%s", n, diff)
	}
}
