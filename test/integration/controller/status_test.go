package controller

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/test/integration/framework"
)

// kubectlGet returns what `kubectl get trainjob NAME -o wide` prints, as
// column → cell, from the API server's Table rendering of the printer columns.
func kubectlGet(t *testing.T, ns, name string) map[string]string {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	raw, err := cs.RESTClient().Get().AbsPath("/apis/trainer.kubeflow.org/v1alpha1/namespaces", ns, "trainjobs", name).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx())
	require.NoError(t, err)
	var table metav1.Table
	require.NoError(t, json.Unmarshal(raw, &table))
	require.Len(t, table.Rows, 1)
	out := map[string]string{}
	for i, col := range table.ColumnDefinitions {
		if col.Name == "Age" {
			continue
		}
		out[col.Name] = fmt.Sprint(table.Rows[0].Cells[i])
	}
	return out
}

// waitGet waits until `kubectl get` shows these cells.
func waitGet(t *testing.T, ns, name string, want map[string]string) {
	t.Helper()
	var last map[string]string
	eventually(t, func() error {
		last = kubectlGet(t, ns, name)
		for k, v := range want {
			if last[k] != v {
				return fmt.Errorf("kubectl get %s: column %s = %q, want %q (row %v)", name, k, last[k], v, last)
			}
		}
		return nil
	})
}

// nodePod creates a trainer pod of a JobSet as the Job controller would, and
// returns a function that sets its status.
func nodePod(t *testing.T, js *jobsetv1alpha2.JobSet, i int) func(corev1.PodStatus) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: js.Namespace, Name: fmt.Sprintf("%s-node-0-%d-abcde", js.Name, i), Labels: map[string]string{
			jobsetv1alpha2.JobSetNameKey: js.Name, jobsetv1alpha2.JobSetUIDKey: string(js.UID), jobsetv1alpha2.ReplicatedJobNameKey: "node",
		}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "node", Image: "example.com/train:v1"}}},
	}
	require.NoError(t, env.Client.Create(ctx(), pod))
	return func(s corev1.PodStatus) {
		eventually(t, func() error {
			var cur corev1.Pod
			if err := env.Client.Get(ctx(), client.ObjectKeyFromObject(pod), &cur); err != nil {
				return err
			}
			cur.Status = s
			return env.Client.Status().Update(ctx(), &cur)
		})
	}
}

var (
	imagePullBackOff = corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
		Name: "node", Image: "example.com/train:v1",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "example.com/train:v1"`}},
	}}}
	runningReady  = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	unschedulable = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: "Unschedulable", Message: "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."}}}
)

// `kubectl get trainjob` tells the truth at every step of suspend → resume →
// image pull trouble → running → suspend → resume → complete.
func TestKubectlGetFollowsTheJob(t *testing.T) {
	ns := newNamespace(t)
	applyFile(t, ns, "runtimes/torch-distributed.yaml")
	require.NoError(t, env.Client.Create(ctx(), torchJob(ns, "life", func(j *trainer.TrainJob) {
		j.Spec.Suspend = ptr.To(true)
		j.Spec.Trainer.NumNodes = ptr.To[int32](2)
	})))
	waitGet(t, ns, "life", map[string]string{"State": "Suspended", "Nodes": "2", "Ready": "0", "Reason": "Suspended",
		"Runtime": "torch-distributed", "Message": "TrainJob is suspended"})

	patchTrainJob(t, ns, "life", func(j *trainer.TrainJob) { j.Spec.Suspend = ptr.To(false) })
	waitGet(t, ns, "life", map[string]string{"State": "Pending", "Reason": "WaitingForPods", "Message": "0/2 nodes running"})

	js := waitJobSetSuspended(t, ns, "life", false)
	pod0, pod1 := nodePod(t, js, 0), nodePod(t, js, 1)
	pod0(imagePullBackOff)
	waitGet(t, ns, "life", map[string]string{"State": "Pending", "Reason": "ImagePullBackOff",
		"Message": `pod life-node-0-0-abcde: container node: ImagePullBackOff: Back-off pulling image "example.com/train:v1"`})
	pod0(runningReady)
	pod1(unschedulable)
	waitGet(t, ns, "life", map[string]string{"State": "Pending", "Ready": "1", "Reason": "Unschedulable",
		"Message": "pod life-node-0-1-abcde: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu."})
	pod1(runningReady)
	waitGet(t, ns, "life", map[string]string{"State": "Running", "Nodes": "2", "Ready": "2", "Reason": "AllNodesStarted", "Message": "2/2 nodes running"})
	job := getTrainJob(t, ns, "life")
	require.NotNil(t, job.Status.StartTime)

	patchTrainJob(t, ns, "life", func(j *trainer.TrainJob) { j.Spec.Suspend = ptr.To(true) })
	waitGet(t, ns, "life", map[string]string{"State": "Suspended", "Reason": "Suspended"})
	require.NoError(t, env.Client.DeleteAllOf(ctx(), &corev1.Pod{}, client.InNamespace(ns))) // what the Job controller does
	patchTrainJob(t, ns, "life", func(j *trainer.TrainJob) { j.Spec.Suspend = ptr.To(false) })
	waitGet(t, ns, "life", map[string]string{"State": "Pending", "Ready": "0", "Reason": "WaitingForPods"})

	js = waitJobSetSuspended(t, ns, "life", false)
	setJobSetStatus(t, js, func(s *jobsetv1alpha2.JobSetStatus) {
		s.ReplicatedJobsStatus = []jobsetv1alpha2.ReplicatedJobStatus{{Name: "node", Succeeded: 1}}
		s.Conditions = []metav1.Condition{{Type: string(jobsetv1alpha2.JobSetCompleted), Status: metav1.ConditionTrue,
			Reason: "AllJobsCompleted", Message: "jobset completed successfully", LastTransitionTime: metav1.Now()}}
	})
	waitGet(t, ns, "life", map[string]string{"State": "Complete", "Reason": "AllJobsCompleted", "Message": "jobset completed successfully"})
	job = getTrainJob(t, ns, "life")
	require.NotNil(t, job.Status.CompletionTime)
}

// Errors show in kubectl get too.
func TestKubectlGetShowsErrors(t *testing.T) {
	ns := newNamespace(t)
	require.NoError(t, env.Client.Create(ctx(), torchJob(ns, "lost", func(j *trainer.TrainJob) {
		j.Spec.RuntimeRef = trainer.RuntimeRef{Name: "missing", Kind: ptr.To(trainer.TrainingRuntimeKind)}
	})))
	waitGet(t, ns, "lost", map[string]string{"State": "Pending", "Reason": "RuntimeNotFound", "Nodes": "<nil>"})
	row := kubectlGet(t, ns, "lost")
	require.True(t, strings.Contains(row["Message"], `TrainingRuntime "`+ns+`/missing" does not exist`), row["Message"])
}

// ttlSecondsAfterFinished deletes a finished TrainJob and, through the garbage
// collector, its JobSet; the JobSet is never recreated on the way.
func TestTTLAfterFinished(t *testing.T) {
	ns := newNamespace(t)
	applyFile(t, ns, "runtimes/torch-distributed.yaml")
	require.NoError(t, env.Client.Create(ctx(), torchJob(ns, "short", func(j *trainer.TrainJob) { j.Spec.TTLSecondsAfterFinished = ptr.To[int32](2) })))
	js := waitJobSet(t, ns, "short")
	setJobSetStatus(t, js, func(s *jobsetv1alpha2.JobSetStatus) {
		s.Conditions = []metav1.Condition{{Type: string(jobsetv1alpha2.JobSetFailed), Status: metav1.ConditionTrue,
			Reason: "FailedJobs", Message: "boom", LastTransitionTime: metav1.Now()}}
	})
	waitPhase(t, ns, "short", trainer.TrainJobFailedPhase)
	eventually(t, func() error {
		if err := env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "short"}, &trainer.TrainJob{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("TrainJob still exists (err=%v)", err)
		}
		return nil
	})
	deadline := time.Now().Add(90 * time.Second)
	for {
		var cur jobsetv1alpha2.JobSet
		err := env.Client.Get(ctx(), client.ObjectKeyFromObject(js), &cur)
		if apierrors.IsNotFound(err) {
			break
		}
		require.NoError(t, err)
		require.Equal(t, js.UID, cur.UID, "the JobSet was recreated")
		require.False(t, time.Now().After(deadline), "JobSet not garbage-collected")
		time.Sleep(200 * time.Millisecond)
	}
}

// The metrics endpoint counts TrainJobs by phase and records latencies.
func TestMetrics(t *testing.T) {
	ns := newNamespace(t)
	applyFile(t, ns, "runtimes/torch-distributed.yaml")
	require.NoError(t, env.Client.Create(ctx(), torchJob(ns, "measured", nil)))
	waitJobSet(t, ns, "measured")
	// An error, so that the manager's registry counts one (it is the
	// registry of this manager only).
	require.NoError(t, env.Client.Create(ctx(), torchJob(ns, "no-runtime", func(j *trainer.TrainJob) { j.Spec.RuntimeRef.Name = "missing" })))
	framework.Eventually(t, func() error {
		var j trainer.TrainJob
		if err := env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "no-runtime"}, &j); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(j.Status.Conditions, trainer.TrainJobCreated); c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("no Created=False yet")
		}
		return nil
	})
	// controller-runtime's own metrics are in its process-wide registry.
	families, err := prometheus.Gatherers{crmetrics.Registry, env.Metrics}.Gather()
	require.NoError(t, err)
	byName := map[string]*dto.MetricFamily{}
	for _, f := range families {
		byName[f.GetName()] = f
	}
	for _, name := range []string{"trainyard_trainjobs", "trainyard_trainjob_time_to_jobset_seconds", "trainyard_trainjob_errors_total",
		"trainyard_trainjob_phase_transitions_total", "controller_runtime_reconcile_total", "controller_runtime_reconcile_time_seconds"} {
		require.Contains(t, byName, name)
	}
	phases := map[string]bool{}
	for _, m := range byName["trainyard_trainjobs"].GetMetric() {
		phases[m.GetLabel()[0].GetValue()] = true
	}
	if diff := cmp.Diff(map[string]bool{"Pending": true, "Running": true, "Suspended": true, "Complete": true, "Failed": true}, phases); diff != "" {
		t.Errorf("phases (-want +got):\n%s", diff)
	}
	require.Positive(t, byName["trainyard_trainjob_time_to_jobset_seconds"].GetMetric()[0].GetHistogram().GetSampleCount())
}
