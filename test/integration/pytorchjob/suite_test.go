// Package pytorchjob tests the PyTorchJob controller against a real
// kube-apiserver and etcd (test/integration/framework), with the CRDs of
// manifests/base/crds. Neither the JobSet nor the Job controller runs: tests
// create the pods the Job controller would, and write JobSet and pod status by
// hand.
package pytorchjob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/controller"
	"github.com/trainyard/trainyard/pkg/controller/pytorchjob"
	"github.com/trainyard/trainyard/test/integration/framework"
)

var (
	env *framework.Env
	// c is a client of the framework's scheme, which knows kubeflow.org/v1.
	c      client.Client
	scheme *k8sruntime.Scheme
)

func TestMain(m *testing.M) {
	framework.Main(m, &env, framework.Options{}, func(*framework.Env) (func(), error) { return startManager() })
}

// startManager runs a manager with the production cache settings and only the
// PyTorchJob controller.
func startManager() (func(), error) {
	scheme = framework.Scheme()
	var err error
	if c, err = client.New(env.Config, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	cacheOpts, err := controller.CacheOptions(env.Config, scheme)
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(env.Config, framework.TestManagerOptions(ctrl.Options{Scheme: scheme, Cache: cacheOpts}))
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	if err := pytorchjob.SetupWithManager(mgr, pytorchjob.Options{MaxConcurrentReconciles: 4}); err != nil {
		return nil, err
	}
	return framework.RunManager(mgr, "manager"), nil
}

func ctx() context.Context { return context.Background() }

func newNamespace(t *testing.T) string { return framework.NewNamespace(t, c, "ptj") }

func eventually(t *testing.T, fn func() error) { t.Helper(); framework.Eventually(t, fn) }

func consistently(t *testing.T, d time.Duration, fn func() error) {
	t.Helper()
	framework.Consistently(t, d, fn)
}

// applyExample creates the objects of a YAML file unchanged, in ns, and
// returns their names.
func applyExample(t *testing.T, ns, rel string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(framework.RepoRoot(), rel))
	require.NoError(t, err)
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var names []string
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return names
			}
			require.NoError(t, err, "decoding %s", rel)
		}
		if len(u.Object) == 0 {
			continue
		}
		u.SetNamespace(ns)
		require.NoError(t, c.Create(ctx(), u), "creating %s %s from %s", u.GetKind(), u.GetName(), rel)
		names = append(names, u.GetName())
	}
}

func getJob(t *testing.T, ns, name string) *kubeflowv1.PyTorchJob {
	t.Helper()
	var job kubeflowv1.PyTorchJob
	require.NoError(t, c.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, &job))
	return &job
}

func patchJob(t *testing.T, ns, name string, mutate func(*kubeflowv1.PyTorchJob)) {
	t.Helper()
	eventually(t, func() error {
		job := getJob(t, ns, name)
		mutate(job)
		return c.Update(ctx(), job)
	})
}

// waitJobSet waits for the job's JobSet and returns it.
func waitJobSet(t *testing.T, ns, name string) *jobsetv1alpha2.JobSet {
	t.Helper()
	var js jobsetv1alpha2.JobSet
	eventually(t, func() error { return c.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, &js) })
	return &js
}

// waitJobSetSuspended waits until the JobSet's suspend flag is want.
func waitJobSetSuspended(t *testing.T, ns, name string, want bool) *jobsetv1alpha2.JobSet {
	t.Helper()
	var js jobsetv1alpha2.JobSet
	eventually(t, func() error {
		if err := c.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, &js); err != nil {
			return err
		}
		if got := ptr.Deref(js.Spec.Suspend, false); got != want {
			return fmt.Errorf("JobSet suspend=%v, want %v", got, want)
		}
		return nil
	})
	return &js
}

// waitCondition waits for a condition of this type, status and reason.
func waitCondition(t *testing.T, ns, name string, condType kubeflowv1.JobConditionType, status corev1.ConditionStatus, reason string) *kubeflowv1.PyTorchJob {
	t.Helper()
	var job *kubeflowv1.PyTorchJob
	eventually(t, func() error {
		job = getJob(t, ns, name)
		cond := pytorchjob.FindCondition(&job.Status, condType)
		if cond == nil || cond.Status != status || (reason != "" && cond.Reason != reason) {
			return fmt.Errorf("condition %s: want %s/%s, have %+v (all: %+v)", condType, status, reason, cond, job.Status.Conditions)
		}
		return nil
	})
	return job
}

// state is what `kubectl get pytorchjob` shows in its State column: the type
// of the last condition.
func state(job *kubeflowv1.PyTorchJob) string {
	if n := len(job.Status.Conditions); n > 0 {
		return string(job.Status.Conditions[n-1].Type)
	}
	return ""
}

// setJobSetStatus writes JobSet status as the JobSet controller would.
func setJobSetStatus(t *testing.T, js *jobsetv1alpha2.JobSet, mutate func(*jobsetv1alpha2.JobSetStatus)) {
	t.Helper()
	eventually(t, func() error {
		var cur jobsetv1alpha2.JobSet
		if err := c.Get(ctx(), client.ObjectKeyFromObject(js), &cur); err != nil {
			return err
		}
		mutate(&cur.Status)
		return c.Status().Update(ctx(), &cur)
	})
}

func jobSetCondition(condType jobsetv1alpha2.JobSetConditionType, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: string(condType), Status: metav1.ConditionTrue, Reason: reason, Message: msg, LastTransitionTime: metav1.Now()}
}

// replicatedJob returns the named replicated job of a JobSet.
func replicatedJob(t *testing.T, js *jobsetv1alpha2.JobSet, name string) jobsetv1alpha2.ReplicatedJob {
	t.Helper()
	for _, rj := range js.Spec.ReplicatedJobs {
		if rj.Name == name {
			return rj
		}
	}
	t.Fatalf("JobSet %s has no replicated job %s", js.Name, name)
	return jobsetv1alpha2.ReplicatedJob{}
}

// createPod creates pod `index` of a replicated job's (only) Job as the Job
// controller would: the template's labels, plus the labels JobSet and Job
// add, including job-name=<the batch Job's name>. It returns a function that
// sets the pod's phase.
func createPod(t *testing.T, js *jobsetv1alpha2.JobSet, rjob string, index int) (*corev1.Pod, func(corev1.PodPhase)) {
	t.Helper()
	return createPodNamed(t, js, rjob, index, fmt.Sprintf("%s-%s-0-%d-abcde", js.Name, rjob, index))
}

// createPodNamed is createPod with the pod's name (for replacement pods).
func createPodNamed(t *testing.T, js *jobsetv1alpha2.JobSet, rjob string, index int, name string) (*corev1.Pod, func(corev1.PodPhase)) {
	t.Helper()
	rj := replicatedJob(t, js, rjob)
	batchJob := fmt.Sprintf("%s-%s-0", js.Name, rjob)
	tmpl := rj.Template.Spec.Template.DeepCopy()
	labels := tmpl.Labels
	for k, v := range map[string]string{
		jobsetv1alpha2.JobSetNameKey: js.Name, jobsetv1alpha2.JobSetUIDKey: string(js.UID), jobsetv1alpha2.ReplicatedJobNameKey: rjob,
		"job-name": batchJob, "batch.kubernetes.io/job-name": batchJob, pytorchjob.CompletionIndexLabel: fmt.Sprint(index),
	} {
		labels[k] = v
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: js.Namespace, Name: name, Labels: labels},
		Spec:       tmpl.Spec,
	}
	require.NoError(t, c.Create(ctx(), pod))
	return pod, func(phase corev1.PodPhase) {
		eventually(t, func() error {
			var cur corev1.Pod
			if err := c.Get(ctx(), client.ObjectKeyFromObject(pod), &cur); err != nil {
				return err
			}
			cur.Status.Phase = phase
			return c.Status().Update(ctx(), &cur)
		})
	}
}

// mnistJob is the mnist example (one Master, one Worker) built in Go, for
// tests that change it before creating it.
func mnistJob(ns, name string, mutate ...func(*kubeflowv1.PyTorchJob)) *kubeflowv1.PyTorchJob {
	replica := func() *kubeflowv1.ReplicaSpec {
		return &kubeflowv1.ReplicaSpec{
			Replicas: ptr.To[int32](1), RestartPolicy: kubeflowv1.RestartPolicyOnFailure,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "pytorch", Image: "kubeflow/pytorch-dist-mnist:latest", Args: []string{"--backend", "gloo"}}}}},
		}
	}
	job := &kubeflowv1.PyTorchJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: kubeflowv1.PyTorchJobSpec{PyTorchReplicaSpecs: map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{
			kubeflowv1.PyTorchJobReplicaTypeMaster: replica(), kubeflowv1.PyTorchJobReplicaTypeWorker: replica(),
		}},
	}
	for _, m := range mutate {
		m(job)
	}
	return job
}

// envOf returns a container's environment as name=value strings, in order.
func envOf(ctr corev1.Container) []string {
	var out []string
	for _, e := range ctr.Env {
		out = append(out, e.Name+"="+e.Value)
	}
	return out
}
