package volcano

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/localcluster"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/volcano"
	"github.com/trainyard/trainyard/test/e2eutil"
)

// Timeouts: Volcano schedules every second; kwok moves a pod through each
// stage after 1–6 s.
const (
	short = time.Minute
	long  = 3 * time.Minute
)

// Files the docs show and the tests apply.
const (
	trainJobFile = "examples/volcano/trainjob.yaml"
	// exampleRuntime is the runtime runtimeFile defines, exampleQueue its queue.
	exampleRuntime = "torch-distributed-volcano"
	exampleQueue   = "training"
)

func ctx() context.Context { return context.Background() }

// newNamespace creates a namespace with its default ServiceAccount ready.
func newNamespace(t *testing.T) string {
	t.Helper()
	return e2eutil.NewNamespace(t, cli, "volcano-", short)
}

// waitFor retries fn until it returns nil.
func waitFor(t *testing.T, timeout time.Duration, fn func() error) {
	t.Helper()
	e2eutil.WaitFor(t, timeout, fn)
}

// exampleJob reads the example TrainJob, in namespace ns under name. With
// hold its pods keep running until deleted (kwok's per-pod controls, set
// through a podTemplateOverride as a user would).
func exampleJob(t *testing.T, ns, name string, hold bool) *trainer.TrainJob {
	t.Helper()
	job := e2eutil.LoadTrainJob(t, filepath.Join(repo, trainJobFile), ns, name)
	if hold {
		job.Spec.PodTemplateOverrides = append(job.Spec.PodTemplateOverrides, trainer.PodTemplateOverride{
			TargetJobs: []trainer.PodTemplateOverrideTargetJob{{Name: "node"}},
			Metadata: &metav1.ObjectMeta{Annotations: map[string]string{
				localcluster.KwokPodCompleteDelay: "1h", localcluster.KwokPodCompleteJitter: "1h1s",
			}},
		})
	}
	return job
}

// exampleRuntimeWithout returns the example runtime under another name
// without Volcano: no podGroupPolicy, no queue, the default scheduler.
func exampleRuntimeWithout(t *testing.T, name string) *trainer.ClusterTrainingRuntime {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repo, runtimeFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var rt trainer.ClusterTrainingRuntime
		if err := yaml.Unmarshal([]byte(doc), &rt); err != nil {
			t.Fatalf("decoding %s: %v", runtimeFile, err)
		}
		if rt.Kind != trainer.ClusterTrainingRuntimeKind {
			continue
		}
		if err := yaml.UnmarshalStrict([]byte(doc), &rt); err != nil {
			t.Fatalf("decoding %s: %v", runtimeFile, err)
		}
		rt.Name, rt.Spec.PodGroupPolicy = name, nil
		delete(rt.Spec.Template.Annotations, volcano.QueueAnnotation)
		for i := range rt.Spec.Template.Spec.ReplicatedJobs {
			rt.Spec.Template.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec.SchedulerName = ""
		}
		return &rt
	}
	t.Fatalf("%s has no ClusterTrainingRuntime", runtimeFile)
	return nil
}

func getJob(t *testing.T, ns, name string) *trainer.TrainJob {
	t.Helper()
	var job trainer.TrainJob
	if err := cli.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, &job); err != nil {
		t.Fatal(err)
	}
	return &job
}

// waitPhase waits until the TrainJob shows this phase and returns it.
func waitPhase(t *testing.T, ns, name string, phase trainer.TrainJobPhase, timeout time.Duration) *trainer.TrainJob {
	t.Helper()
	var job trainer.TrainJob
	waitFor(t, timeout, func() error {
		if err := cli.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, &job); err != nil {
			return err
		}
		if job.Status.Phase != phase {
			return fmt.Errorf("TrainJob %s: %s/%s (%s), want phase %s", name, job.Status.Phase, job.Status.Reason, job.Status.Message, phase)
		}
		return nil
	})
	return &job
}

// podGroup returns the TrainJob's Volcano PodGroup.
func podGroup(ns, name string) (*unstructured.Unstructured, error) {
	pg := volcano.NewPodGroup()
	return pg, cli.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, pg)
}

// unschedulable returns the reason and message of the PodGroup's
// Unschedulable=True condition, which Volcano sets when it cannot place the gang.
func unschedulable(pg *unstructured.Unstructured) (reason, message string, ok bool) {
	conds, _, _ := unstructured.NestedSlice(pg.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Unschedulable" && m["status"] == "True" {
			reason, _ = m["reason"].(string)
			message, _ = m["message"].(string)
			return reason, message, true
		}
	}
	return "", "", false
}

// waitGangReason waits until Volcano has refused the job's PodGroup and the
// TrainJob is Pending with the PodGroup's reason and message, and returns the
// TrainJob.
func waitGangReason(t *testing.T, ns, name string) *trainer.TrainJob {
	t.Helper()
	var job trainer.TrainJob
	waitFor(t, short, func() error {
		pg, err := podGroup(ns, name)
		if err != nil {
			return err
		}
		reason, message, ok := unschedulable(pg)
		if !ok {
			return fmt.Errorf("PodGroup %s: no Unschedulable condition yet (status %v)", name, pg.Object["status"])
		}
		if err := cli.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, &job); err != nil {
			return err
		}
		want := fmt.Sprintf("PodGroup %s: %s", name, message)
		if job.Status.Phase != trainer.TrainJobPending || job.Status.Reason != reason || job.Status.Message != want {
			return fmt.Errorf("TrainJob %s: %s/%s %q, want %s/%s %q", name, job.Status.Phase, job.Status.Reason, job.Status.Message,
				trainer.TrainJobPending, reason, want)
		}
		return nil
	})
	return &job
}

// podWatch records every change of the pods of a namespace, in the API
// server's order, and checks an invariant on the pods after each one: so a
// state that lasted only between two events is checked too.
type podWatch struct {
	mu         sync.Mutex
	pods       map[string]corev1.Pod // by name
	violations []string
	events     int
	stop       context.CancelFunc
	done       chan struct{}
	finished   sync.Once
}

// watchPods starts recording the namespace's pods (before any exists) and
// runs check on each state; a non-nil error is recorded as a violation.
// finish (or the test's end, whichever comes first) stops it and reports
// the violations.
func watchPods(t *testing.T, ns string, check func(pods map[string]corev1.Pod) error) *podWatch {
	t.Helper()
	wctx, cancel := context.WithCancel(ctx())
	w, err := wcli.Watch(wctx, &corev1.PodList{}, client.InNamespace(ns))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	pw := &podWatch{pods: map[string]corev1.Pod{}, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(pw.done)
		defer w.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					pw.record("the pod watch ended early")
					return
				}
				pod, isPod := ev.Object.(*corev1.Pod)
				if !isPod {
					pw.record(fmt.Sprintf("pod watch: %s event with a %T", ev.Type, ev.Object))
					continue
				}
				pw.mu.Lock()
				if ev.Type == watch.Deleted {
					delete(pw.pods, pod.Name)
				} else {
					pw.pods[pod.Name] = *pod
				}
				pw.events++
				err := check(pw.pods)
				pw.mu.Unlock()
				if err != nil {
					pw.record(err.Error())
				}
			}
		}
	}()
	t.Cleanup(func() { pw.finish(t) })
	return pw
}

func (pw *podWatch) record(v string) {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	pw.violations = append(pw.violations, v)
}

// finish stops the watch and fails the test with every violation seen.
func (pw *podWatch) finish(t *testing.T) {
	t.Helper()
	pw.finished.Do(func() {
		pw.stop()
		<-pw.done
		pw.mu.Lock()
		defer pw.mu.Unlock()
		if n := len(pw.violations); n > 0 {
			t.Errorf("%d of %d pod events broke the gang; the first:\n%s", n, pw.events, strings.Join(pw.violations[:min(n, 3)], "\n"))
		}
	})
}

// active reports whether a pod holds its node: bound, not finished, not being deleted.
func active(p *corev1.Pod) bool {
	return p.Spec.NodeName != "" && p.DeletionTimestamp == nil &&
		p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// activeByJob counts the active pods of each TrainJob (its JobSet's name label).
func activeByJob(pods map[string]corev1.Pod) map[string]int {
	n := map[string]int{}
	for _, p := range pods {
		if active(&p) {
			n[p.Labels[jobsetv1alpha2.JobSetNameKey]]++
		}
	}
	return n
}

// describe lists pods as name@node (phase), for failure messages.
func describe(pods map[string]corev1.Pod) string {
	var out []string
	for _, p := range pods {
		node := p.Spec.NodeName
		if node == "" {
			node = "-"
		}
		out = append(out, fmt.Sprintf("%s@%s(%s)", p.Name, node, p.Status.Phase))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// jobPods lists the pods of a TrainJob.
func jobPods(ns, name string) ([]corev1.Pod, error) {
	var list corev1.PodList
	err := cli.List(ctx(), &list, client.InNamespace(ns), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: name})
	return list.Items, err
}

// deleteJob deletes a TrainJob and waits until its pods are gone, so that
// their nodes are free for the next scenario.
func deleteJob(t *testing.T, ns, name string) {
	t.Helper()
	job := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := cli.Delete(ctx(), job, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, long, func() error {
		pods, err := jobPods(ns, name)
		if err != nil {
			return err
		}
		if len(pods) > 0 {
			return errors.New(describe(byName(pods)) + " still there")
		}
		return nil
	})
}

func byName(pods []corev1.Pod) map[string]corev1.Pod {
	m := map[string]corev1.Pod{}
	for _, p := range pods {
		m[p.Name] = p
	}
	return m
}
