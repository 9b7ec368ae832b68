// Package logs reads the logs of a TrainJob's node pods through the API server, as
// `kubectl logs` does, one line at a time and each line prefixed with its node,
// "[node-<rank>]: ", the shape the Kubeflow SDK prints (or with another name of
// the pod: an initializer step, a PyTorchJob's replica). Print reads what the
// pods have logged so far; Follow streams every node while the job runs,
// including pods that appear later and containers that restart.
package logs

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Labels and annotations that identify a TrainJob's pods.
const (
	// JobSetNameLabel is on every pod of a JobSet; a TrainJob's JobSet has its name.
	JobSetNameLabel = "jobset.sigs.k8s.io/jobset-name"
	// CompletionIndexKey is the node rank of a pod of an Indexed Job (a label and
	// an annotation).
	CompletionIndexKey = "batch.kubernetes.io/job-completion-index"
	// NodeContainer is the trainer's container.
	NodeContainer = "node"
)

// pollInterval is how often Follow looks for new pods and restarted containers.
const pollInterval = 300 * time.Millisecond

// Streamer reads the logs of one TrainJob's node pods.
type Streamer struct {
	Client    kubernetes.Interface
	Namespace string
	// Job is the TrainJob's name (and its JobSet's).
	Job string
	// Kind is the job's kind in messages; empty means TrainJob.
	Kind string
	// Selector, when set, is the label selector of the job's pods; empty means
	// those of the JobSet named Job (JobSetNameLabel=Job).
	Selector string
	// Node restricts the logs to one node rank; -1 (or any negative) means all.
	Node int
	// Out receives every line, prefix included. Calls are serialised.
	Out func(line string)
	// Step, when set with Select and Container, reads the pods of another step
	// (an initializer) instead of the nodes: the pods Select picks (Node does not
	// apply), their container Container, each line prefixed "[<Step>]: ".
	Step      string
	Select    func(pod *corev1.Pod) bool
	Container string
	// Name, when set with Container, names the pods to read instead of the
	// node ranks (a PyTorchJob's replicas, master-0, worker-1): the pods for
	// which it returns ok, ordered by order, each line prefixed "[<name>]: ".
	// Node, Step and Select do not apply.
	Name func(pod *corev1.Pod) (name string, order int, ok bool)
	// ContainerOf, when set with Name, is the container read of each pod
	// instead of Container (an MPIJob's launcher and workers name theirs as
	// they like).
	ContainerOf func(pod *corev1.Pod) string

	mu sync.Mutex
}

// Rank is the node rank of a pod: its Job completion index.
func Rank(pod *corev1.Pod) (int, bool) {
	v, ok := pod.Labels[CompletionIndexKey]
	if !ok {
		v, ok = pod.Annotations[CompletionIndexKey]
	}
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	return n, err == nil
}

// Prefix is what each line of a node's log starts with.
func Prefix(rank int) string { return fmt.Sprintf("[node-%d]: ", rank) }

// container is the container the Streamer reads of pod.
func (s *Streamer) container(pod *corev1.Pod) string {
	if s.Name != nil && s.ContainerOf != nil {
		return s.ContainerOf(pod)
	}
	if s.Step != "" || s.Name != nil {
		return s.Container
	}
	return NodeContainer
}

// ident says whether the Streamer reads the pod, what each line of its log
// starts with, and where it goes among the others.
func (s *Streamer) ident(pod *corev1.Pod) (prefix string, order int, ok bool) {
	if s.Name != nil {
		name, order, ok := s.Name(pod)
		return "[" + name + "]: ", order, ok
	}
	rank, ok := Rank(pod)
	if s.Step != "" {
		return "[" + s.Step + "]: ", rank, s.Select(pod)
	}
	return Prefix(rank), rank, ok && (s.Node < 0 || rank == s.Node)
}

// prefix is what each line of the pod's log starts with.
func (s *Streamer) prefix(pod *corev1.Pod) string {
	p, _, _ := s.ident(pod)
	return p
}

func (s *Streamer) kind() string {
	if s.Kind == "" {
		return "TrainJob"
	}
	return s.Kind
}

func (s *Streamer) line(l string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Out(l)
}

// pods lists the pods of the job that the Streamer reads, ordered by rank (or
// the order Name gives), then creation.
func (s *Streamer) pods(ctx context.Context) ([]corev1.Pod, error) {
	sel := s.Selector
	if sel == "" {
		sel = JobSetNameLabel + "=" + s.Job
	}
	list, err := s.Client.CoreV1().Pods(s.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("listing the pods of %s %s/%s: %w", s.kind(), s.Namespace, s.Job, err)
	}
	type read struct {
		pod   corev1.Pod
		order int
	}
	var rs []read
	for _, p := range list.Items {
		if _, order, ok := s.ident(&p); ok && hasContainer(&p, s.container(&p)) {
			rs = append(rs, read{p, order})
		}
	}
	sort.SliceStable(rs, func(i, j int) bool {
		if rs[i].order != rs[j].order {
			return rs[i].order < rs[j].order
		}
		return rs[i].pod.CreationTimestamp.Before(&rs[j].pod.CreationTimestamp)
	})
	out := make([]corev1.Pod, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.pod)
	}
	return out, nil
}

func hasContainer(pod *corev1.Pod, name string) bool {
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	return false
}

func containerStatus(pod *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == name {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// started reports whether the container has run (so that it has logs).
func started(st *corev1.ContainerStatus) bool {
	return st != nil && (st.State.Running != nil || st.State.Terminated != nil)
}

// Print writes what every node has logged so far, node by node. Pods whose
// container has not started yet are skipped. It returns how many pods it read.
func (s *Streamer) Print(ctx context.Context) (int, error) {
	pods, err := s.pods(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pods {
		if !started(containerStatus(&p, s.container(&p))) {
			continue
		}
		if err := s.stream(ctx, p.Name, s.container(&p), s.prefix(&p), false); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// stream copies one container log, line by line, to Out.
func (s *Streamer) stream(ctx context.Context, pod, container, prefix string, follow bool) error {
	rc, err := s.Client.CoreV1().Pods(s.Namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container, Follow: follow}).Stream(ctx)
	if err != nil {
		return fmt.Errorf("reading the log of pod %s: %w", pod, err)
	}
	defer func() { _ = rc.Close() }()
	return scanLines(rc, func(l string) { s.line(prefix + l) })
}

// scanLines calls fn for each line of r; a last line without a newline counts.
func scanLines(r io.Reader, fn func(string)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		fn(sc.Text())
	}
	return sc.Err()
}

// Follow streams the log of every node pod of the job, as `kubectl logs -f`
// does, one stream per pod and run of its container, until finished is closed
// and the streams have ended (they end with the containers), or drain has passed
// since finished was closed, or ctx is done. Pods that appear while it runs are
// followed too; it looks for them until finished is closed, and at least once.
func (s *Streamer) Follow(ctx context.Context, finished <-chan struct{}, drain time.Duration) {
	streamCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	seen := map[string]bool{}
	for done := false; !done; {
		pods, err := s.pods(ctx)
		if err == nil {
			for _, p := range pods {
				if seen[string(p.UID)] || p.Spec.NodeName == "" {
					continue
				}
				seen[string(p.UID)] = true
				wg.Add(1)
				go func(pod corev1.Pod) {
					defer wg.Done()
					s.followPod(streamCtx, pod)
				}(p)
			}
		}
		select {
		case <-ctx.Done():
			done = true
		case <-finished:
			done = true
		case <-time.After(pollInterval):
		}
	}
	ended := make(chan struct{})
	go func() { wg.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(drain):
		cancel()
		<-ended
	}
}

// followPod follows one pod's container, again after each restart, until
// the pod has finished (or is deleted before its container started).
func (s *Streamer) followPod(ctx context.Context, pod corev1.Pod) {
	prefix := s.prefix(&pod)
	streamed := int32(-1) // the runs of the container streamed so far
	for ctx.Err() == nil {
		cur, err := s.Client.CoreV1().Pods(s.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return
		}
		st := containerStatus(cur, s.container(cur))
		run := started(st)
		if run && st.RestartCount > streamed {
			streamed = st.RestartCount
			if streamed > 0 {
				s.line(prefix + fmt.Sprintf("--- container restarted (restart %d)", streamed))
			}
			if err := s.stream(ctx, pod.Name, s.container(cur), prefix, true); err != nil && ctx.Err() == nil {
				s.line(prefix + "(logs: " + err.Error() + ")")
			}
			continue
		}
		if cur.Status.Phase == corev1.PodSucceeded || cur.Status.Phase == corev1.PodFailed || cur.DeletionTimestamp != nil && !run {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(pollInterval):
		}
	}
}
