package coscheduling

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/localcluster"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/coscheduling"
	"github.com/trainyard/trainyard/test/e2eutil"
)

// Timeouts of the waits: kwok moves a pod through each stage after 1–6 s, and
// the scheduler retries an unschedulable gang with backoff.
const (
	short = time.Minute
	long  = 4 * time.Minute
)

// nodeCPU is every kwok node's CPU; a pod requesting podCPU takes a node.
const (
	nodeCPU = "32"
	podCPU  = "20"
)

func ctx() context.Context { return context.Background() }

func repoFile(rel string) string {
	root, err := localcluster.FindRepoDir(".")
	if err != nil {
		panic(err)
	}
	return filepath.Join(root, rel)
}

// waitFor retries fn until it returns nil.
func waitFor(t *testing.T, timeout time.Duration, fn func() error) {
	t.Helper()
	e2eutil.WaitFor(t, timeout, fn)
}

// setNodes makes the cluster's CPU pool exactly n kwok nodes of nodeCPU CPUs
// (kwok-cpu-0 …), adding or deleting the last ones. Call it while no pod is
// bound to a node that goes.
func setNodes(t *testing.T, n int) {
	t.Helper()
	var nodes corev1.NodeList
	if err := cli.List(ctx(), &nodes, client.MatchingLabels{localcluster.PoolLabel: "cpu"}); err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, node := range nodes.Items {
		have[node.Name] = true
	}
	for i := 0; i < n; i++ {
		if name := fmt.Sprintf("kwok-cpu-%d", i); !have[name] {
			if err := c.AddKwokNode(ctx(), name, nodeCPU, "256Gi"); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, node := range nodes.Items {
		i, err := strconv.Atoi(strings.TrimPrefix(node.Name, "kwok-cpu-"))
		if err == nil && i >= n {
			if err := cli.Delete(ctx(), &node); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// newNamespace creates a namespace with its default ServiceAccount ready. On
// cleanup its TrainJobs are deleted and the test waits until their pods are
// gone, so that the next test finds every node empty.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "gang-"}}
	if err := cli.Create(ctx(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cli.DeleteAllOf(ctx(), &trainer.TrainJob{}, client.InNamespace(ns.Name), client.PropagationPolicy(metav1.DeletePropagationForeground))
		waitFor(t, long, func() error {
			var pods corev1.PodList
			if err := cli.List(ctx(), &pods, client.InNamespace(ns.Name)); err != nil {
				return err
			}
			if len(pods.Items) > 0 {
				return fmt.Errorf("%d pods left in %s", len(pods.Items), ns.Name)
			}
			return nil
		})
		_ = cli.Delete(ctx(), ns)
	})
	waitFor(t, short, func() error {
		return cli.Get(ctx(), client.ObjectKey{Namespace: ns.Name, Name: "default"}, &corev1.ServiceAccount{})
	})
	return ns.Name
}

// gangRuntime creates a copy of the example runtime under another name, changed
// by mutate (nil: unchanged), and deletes it when the test ends.
func gangRuntime(t *testing.T, name string, mutate func(*trainer.ClusterTrainingRuntime)) {
	t.Helper()
	data, err := os.ReadFile(repoFile(runtimeFile))
	if err != nil {
		t.Fatal(err)
	}
	var rt trainer.ClusterTrainingRuntime
	if err := yaml.UnmarshalStrict(data, &rt); err != nil {
		t.Fatalf("decoding %s: %v", runtimeFile, err)
	}
	rt.Name = name
	if mutate != nil {
		mutate(&rt)
	}
	if err := cli.Create(ctx(), &rt); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Delete(ctx(), &rt) })
}

// trainJob reads the example TrainJob, renamed into ns, with nodes pods of cpu
// CPUs each on the runtime rt, whose pods kwok keeps running for about run
// before completing them.
func trainJob(t *testing.T, ns, name, rt string, nodes int32, cpu string, run time.Duration) *trainer.TrainJob {
	t.Helper()
	job := e2eutil.LoadTrainJob(t, repoFile(trainJobFile), ns, name)
	job.Spec.RuntimeRef.Name = rt
	job.Spec.Trainer.NumNodes = ptr.To(nodes)
	job.Spec.Trainer.ResourcesPerNode.Requests[corev1.ResourceCPU] = resource.MustParse(cpu)
	// kwok waits min(delay, jitter-delay) when the jitter is not larger than
	// the delay, and the stage's default jitter is 5s, so both are set.
	job.Spec.PodTemplateOverrides = append(job.Spec.PodTemplateOverrides, trainer.PodTemplateOverride{
		TargetJobs: []trainer.PodTemplateOverrideTargetJob{{Name: "node"}},
		Metadata: &metav1.ObjectMeta{Annotations: map[string]string{
			localcluster.KwokPodCompleteDelay:  run.String(),
			localcluster.KwokPodCompleteJitter: (run + time.Second).String(),
		}},
	})
	return job
}

func create(t *testing.T, jobs ...*trainer.TrainJob) {
	t.Helper()
	for _, job := range jobs {
		if err := cli.Create(ctx(), job); err != nil {
			t.Fatal(err)
		}
	}
}

func get(t *testing.T, ns, name string) *trainer.TrainJob {
	t.Helper()
	var job trainer.TrainJob
	if err := cli.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, &job); err != nil {
		t.Fatal(err)
	}
	return &job
}

// waitStatus waits until the TrainJob's status satisfies ok (which says what
// is missing) and returns it.
func waitStatus(t *testing.T, ns, name string, timeout time.Duration, ok func(*trainer.TrainJobStatus) error) *trainer.TrainJob {
	t.Helper()
	var job trainer.TrainJob
	waitFor(t, timeout, func() error {
		if err := cli.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, &job); err != nil {
			return err
		}
		if err := ok(&job.Status); err != nil {
			return fmt.Errorf("TrainJob %s: %s/%s (%s): %w", name, job.Status.Phase, job.Status.Reason, job.Status.Message, err)
		}
		return nil
	})
	return &job
}

// phase is a waitStatus check for a phase.
func phase(want trainer.TrainJobPhase) func(*trainer.TrainJobStatus) error {
	return func(s *trainer.TrainJobStatus) error {
		if s.Phase != want {
			return fmt.Errorf("want phase %s", want)
		}
		return nil
	}
}

// pods lists the pods of a TrainJob (of its JobSet), sorted by name.
func pods(t *testing.T, ns, name string) []corev1.Pod {
	t.Helper()
	var list corev1.PodList
	if err := cli.List(ctx(), &list, client.InNamespace(ns), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: name}); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(list.Items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return list.Items
}

// bound counts the pods bound to a node.
func bound(ps []corev1.Pod) int {
	n := 0
	for _, p := range ps {
		if p.Spec.NodeName != "" {
			n++
		}
	}
	return n
}

// unschedulable returns the pods the scheduler reported unschedulable, with
// the scheduler's message.
func unschedulable(ps []corev1.Pod) map[string]string {
	out := map[string]string{}
	for _, p := range ps {
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
				out[p.Name] = cond.Message
			}
		}
	}
	return out
}

// podGroup returns the TrainJob's PodGroup.
func podGroup(t *testing.T, ns, name string) *unstructured.Unstructured {
	t.Helper()
	pg := coscheduling.NewPodGroup()
	if err := cli.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, pg); err != nil {
		t.Fatal(err)
	}
	return pg
}

// bindingWatch samples the pods of a namespace until stopped and hands each
// sample to check, which returns a violation to report (or ""). A binding
// stays until the pod is deleted, so sampling sees every pod ever bound.
type bindingWatch struct {
	stop       chan struct{}
	done       chan struct{}
	mu         sync.Mutex
	samples    int
	violations []string
}

func watchBindings(t *testing.T, ns string, check func(byJob map[string][]corev1.Pod) string) *bindingWatch {
	t.Helper()
	w := &bindingWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			var list corev1.PodList
			if err := cli.List(ctx(), &list, client.InNamespace(ns)); err == nil {
				byJob := map[string][]corev1.Pod{}
				for _, p := range list.Items {
					if job := p.Labels[jobsetv1alpha2.JobSetNameKey]; job != "" {
						byJob[job] = append(byJob[job], p)
					}
				}
				v := check(byJob)
				w.mu.Lock()
				w.samples++
				if v != "" && len(w.violations) < 10 {
					w.violations = append(w.violations, v)
				}
				w.mu.Unlock()
			}
			select {
			case <-w.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { w.finish(t) })
	return w
}

// finish stops the watch and fails the test on any violation it saw.
func (w *bindingWatch) finish(t *testing.T) {
	t.Helper()
	select {
	case <-w.done:
		return
	default:
	}
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.violations) > 0 {
		t.Errorf("partial bindings seen in %d samples, first: %v", w.samples, w.violations)
	}
}

// sawSamples waits until the watch has taken a sample after this call, so that
// what the test observed since is also checked by the watch.
func (w *bindingWatch) sawSamples(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	n := w.samples
	w.mu.Unlock()
	waitFor(t, short, func() error {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.samples < n+2 {
			return fmt.Errorf("watch at sample %d", w.samples)
		}
		return nil
	})
}
