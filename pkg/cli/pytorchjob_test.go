package cli

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/cli/view"
	"github.com/trainyard/trainyard/pkg/controller/pytorchjob"
)

func TestParseJobRef(t *testing.T) {
	kinds := kindTable(Kinds())
	tj, pj := kinds.byKind(trainer.TrainJobKind), kinds.byKind(kubeflowv1.PyTorchJobKind)
	type ref struct{ Kind, Name string }
	cases := []struct {
		arg     string
		def     view.Kind
		kindSet bool
		want    ref
		wantErr string
	}{
		{arg: "mnist", def: tj, want: ref{trainer.TrainJobKind, "mnist"}},
		{arg: "mnist", def: pj, kindSet: true, want: ref{kubeflowv1.PyTorchJobKind, "mnist"}},
		{arg: "pytorchjob/mnist", def: tj, want: ref{kubeflowv1.PyTorchJobKind, "mnist"}},
		{arg: "PyTorchJobs/mnist", def: tj, want: ref{kubeflowv1.PyTorchJobKind, "mnist"}},
		{arg: "trainjob/mnist", def: tj, want: ref{trainer.TrainJobKind, "mnist"}},
		{arg: "tj/mnist", def: tj, kindSet: true, want: ref{trainer.TrainJobKind, "mnist"}},
		{arg: "job/mnist", def: tj, wantErr: `unknown kind "job"`},
		{arg: "pytorchjob/", def: tj, wantErr: "want KIND/NAME with one name"},
		{arg: "pytorchjob/a/b", def: tj, wantErr: "want KIND/NAME with one name"},
		{arg: "trainjob/mnist", def: pj, kindSet: true, wantErr: "is a TrainJob, but --kind says PyTorchJob"},
	}
	for _, tc := range cases {
		t.Run(tc.arg, func(t *testing.T) {
			got, err := kinds.parseRef(tc.arg, tc.def, tc.kindSet)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, ref{got.Kind.Kind(), got.Name}); diff != "" {
				t.Errorf("parseRef (-want +got):\n%s", diff)
			}
		})
	}
}

// replicaPod is a pod of PyTorchJob job for the replica rtype-index (labels as
// Trainyard and the training operator set them), in phase, on a node, with a
// pytorch container.
func replicaPod(job, name, rtype, index string, phase corev1.PodPhase, res corev1.ResourceRequirements) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name), Labels: map[string]string{
			kubeflowv1.JobNameLabel: job, kubeflowv1.OperatorNameLabel: kubeflowv1.PyTorchJobOperatorName,
			kubeflowv1.ReplicaTypeLabel: rtype, "jobset.sigs.k8s.io/jobset-name": job,
		}},
		Spec:   corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "pytorch", Resources: res}}},
		Status: corev1.PodStatus{Phase: phase},
	}
	if index != "" {
		p.Labels[kubeflowv1.ReplicaIndexLabel] = index
	}
	p.Status.ContainerStatuses = containerStatuses(p)
	return p
}

func jobCond(typ kubeflowv1.JobConditionType, status corev1.ConditionStatus, reason, msg string) kubeflowv1.JobCondition {
	return kubeflowv1.JobCondition{Type: typ, Status: status, Reason: reason, Message: msg}
}

// pyTorchJob is a PyTorchJob in namespace ns with a Master and workers Workers.
func pyTorchJob(name string, workers int32, conds ...kubeflowv1.JobCondition) *kubeflowv1.PyTorchJob {
	return &kubeflowv1.PyTorchJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: kubeflowv1.PyTorchJobSpec{PyTorchReplicaSpecs: map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{
			kubeflowv1.PyTorchJobReplicaTypeWorker: {Replicas: ptr.To(workers)},
			kubeflowv1.PyTorchJobReplicaTypeMaster: {},
		}},
		Status: kubeflowv1.JobStatus{Conditions: conds},
	}
}

// pyTorchJobCluster has a running PyTorchJob with its three pods, a finished
// and a failed one, and a TrainJob.
func pyTorchJobCluster(t *testing.T) *fakeCluster {
	created := jobCond(kubeflowv1.JobCreated, corev1.ConditionTrue, "PyTorchJobCreated", "")
	running := pyTorchJob("mnist", 2, created, jobCond(kubeflowv1.JobRunning, corev1.ConditionTrue, "PyTorchJobRunning", "PyTorchJob mnist is running."))
	running.Status.ReplicaStatuses = map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaStatus{
		kubeflowv1.PyTorchJobReplicaTypeMaster: {Active: 1}, kubeflowv1.PyTorchJobReplicaTypeWorker: {Active: 1}}
	return newFakeCluster(t,
		running,
		replicaPod("mnist", "mnist-worker-1-0-bbbbb", "worker", "1", corev1.PodPending, limits("cpu", "1")),
		replicaPod("mnist", "mnist-master-0-aaaaa", "master", "0", corev1.PodRunning, limits("cpu", "1")),
		replicaPod("mnist", "mnist-worker-0-0-ccccc", "worker", "0", corev1.PodRunning, limits("cpu", "1")),
		pyTorchJob("done", 1, created, jobCond(kubeflowv1.JobSucceeded, corev1.ConditionTrue, "PyTorchJobSucceeded", "PyTorchJob done is successfully completed.")),
		replicaPod("done", "done-master-0-ddddd", "master", "0", corev1.PodSucceeded, corev1.ResourceRequirements{}),
		replicaPod("done", "done-worker-0-0-eeeee", "worker", "0", corev1.PodSucceeded, corev1.ResourceRequirements{}),
		pyTorchJob("broken", 1, created, jobCond(kubeflowv1.JobFailed, corev1.ConditionTrue, "PyTorchJobFailed", "PyTorchJob broken is failed because 1 Worker replica(s) failed.")),
		trainJob("tj", trainer.TrainJobStatus{Phase: "Running"}),
	)
}

func TestGetPyTorchJobCommand(t *testing.T) {
	f := pyTorchJobCluster(t)
	code, out, errOut := f.run("get", "pytorchjob/mnist")
	want := `Name:      mnist
Namespace: ns
Kind:      PyTorchJob
Replicas:  Master 1, Worker 2
Status:    Running
Reason:    PyTorchJobRunning
Message:   PyTorchJob mnist is running.
Age:       -
Steps:
  Step: master-0, Status: Running, Devices: cpu x 1, Pod: mnist-master-0-aaaaa
  Step: worker-0, Status: Running, Devices: cpu x 1, Pod: mnist-worker-0-0-ccccc
  Step: worker-1, Status: Pending, Devices: cpu x 1, Pod: mnist-worker-1-0-bbbbb
`
	if diff := cmp.Diff(want, out); code != 0 || diff != "" {
		t.Errorf("get pytorchjob/mnist: exit %d, %s, stdout (-want +got):\n%s", code, errOut, diff)
	}
	// --kind gives the kind of a bare name, and lists that kind without one.
	if code, out2, _ := f.run("get", "--kind", "pytorchjob", "mnist"); code != 0 || out2 != out {
		t.Errorf("get --kind pytorchjob mnist: exit %d:\n%s", code, out2)
	}
	code, out, _ = f.run("get", "--kind", "PyTorchJob")
	want = `NAME    REPLICAS            STATUS     REASON               AGE
broken  Master 1, Worker 1  Failed     PyTorchJobFailed     -
done    Master 1, Worker 1  Succeeded  PyTorchJobSucceeded  -
mnist   Master 1, Worker 2  Running    PyTorchJobRunning    -
`
	if diff := cmp.Diff(want, out); code != 0 || diff != "" {
		t.Errorf("get --kind pytorchjob: exit %d, stdout (-want +got):\n%s", code, diff)
	}
	code, out, _ = f.run("get", "pytorchjob/done", "-o", "json")
	var got pytorchjob.Job
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
		t.Fatalf("-o json: exit %d, %v\n%s", code, err, out)
	}
	var steps []string
	for _, s := range got.Steps {
		steps = append(steps, s.Name+" "+s.Status)
	}
	if diff := cmp.Diff([]string{"master-0 Succeeded", "worker-0 Succeeded"}, steps); got.Status != "Succeeded" || diff != "" {
		t.Errorf("-o json: status %q, steps (-want +got):\n%s", got.Status, diff)
	}
	// A bare name is still a TrainJob.
	if code, out, errOut := f.run("get", "tj"); code != 0 || !strings.Contains(out, "Name:      tj\n") {
		t.Errorf("get tj: exit %d: %s%s", code, out, errOut)
	}
}

// The fake clientset answers every log request with "fake logs".
func TestLogsPyTorchJobCommand(t *testing.T) {
	f := pyTorchJobCluster(t)
	cases := []struct {
		args    []string
		want    string
		wantErr string
	}{
		// worker-1 is Pending (its container has not started): not read.
		{args: []string{"logs", "pytorchjob/mnist"}, want: "[master-0]: fake logs\n[worker-0]: fake logs\n"},
		{args: []string{"logs", "--kind", "pytorchjob", "mnist", "--step", "worker-0"}, want: "[worker-0]: fake logs\n"},
		{args: []string{"logs", "pytorchjob/mnist", "--step", "worker-1"},
			wantErr: "replica worker-1 of PyTorchJob mnist has not started yet"},
		{args: []string{"logs", "pytorchjob/broken"}, wantErr: "no replica of PyTorchJob broken has started yet"},
		// Finished: -f reads what is there and returns.
		{args: []string{"logs", "-f", "pytorchjob/done"}, want: "[master-0]: fake logs\n[worker-0]: fake logs\n"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := f.run(tc.args...)
			if code != 0 || !strings.Contains(errOut, tc.wantErr) {
				t.Errorf("exit %d, stderr %q; want 0 and %q", code, errOut, tc.wantErr)
			}
			got := out
			if tc.args[1] == "-f" {
				// Followed streams interleave.
				lines := strings.SplitAfter(out, "\n")
				sort.Strings(lines)
				got = strings.Join(lines, "")
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWaitPyTorchJobCommand(t *testing.T) {
	f := pyTorchJobCluster(t)
	cases := []struct {
		args            []string
		code            int
		inStdout, inErr string
		stdoutLineCount int
	}{
		{args: []string{"wait", "pytorchjob/done"}, code: ExitOK,
			inStdout: "PyTorchJob done: Succeeded (PyTorchJobSucceeded: PyTorchJob done is successfully completed.)", stdoutLineCount: 1},
		{args: []string{"wait", "pytorchjob/broken"}, code: ExitFailed,
			inErr: "PyTorchJob broken Failed: PyTorchJobFailed: PyTorchJob broken is failed because 1 Worker replica(s) failed."},
		{args: []string{"wait", "pytorchjob/mnist", "--timeout", "200ms", "--interval", "20ms"}, code: ExitTimeout,
			inStdout: "PyTorchJob mnist: Running, 2/3 replicas active (PyTorchJobRunning: PyTorchJob mnist is running.)",
			inErr:    "PyTorchJob mnist not finished after 200ms", stdoutLineCount: 1},
		{args: []string{"wait", "--kind", "pytorchjob", "mnist", "--for", "created,running"}, code: ExitOK, stdoutLineCount: 1},
		{args: []string{"wait", "pytorchjob/done", "--for", "Running"}, code: ExitFailed, inErr: "PyTorchJob done is Succeeded; it will not be Running"},
		{args: []string{"wait", "pytorchjob/mnist", "--for", "Restarting", "--timeout", "100ms", "--interval", "20ms"}, code: ExitTimeout,
			inErr: "PyTorchJob mnist not Restarting after 100ms"},
		{args: []string{"wait", "pytorchjob/done", "--for", "Complete"}, code: ExitUsage,
			inErr: `unknown status "Complete"; want some of Created, Running, Restarting, Suspended, Succeeded, Failed`},
		{args: []string{"wait", "pytorchjob/gone"}, code: ExitFailed, inErr: "not found"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := f.run(tc.args...)
			if code != tc.code || !strings.Contains(out, tc.inStdout) || !strings.Contains(errOut, tc.inErr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d, %q, %q", code, out, errOut, tc.code, tc.inStdout, tc.inErr)
			}
			if n := strings.Count(out, "\n"); tc.stdoutLineCount > 0 && n != tc.stdoutLineCount {
				t.Errorf("%d lines, want %d:\n%s", n, tc.stdoutLineCount, out)
			}
		})
	}
}

func TestDeletePyTorchJobCommand(t *testing.T) {
	f := pyTorchJobCluster(t)
	code, _, errOut := f.run("delete", "pytorchjob/done", "trainjob/tj", "--kind", "pytorchjob")
	if code != ExitUsage || !strings.Contains(errOut, `"trainjob/tj" is a TrainJob, but --kind says PyTorchJob`) {
		t.Errorf("delete with a conflicting --kind: exit %d: %s", code, errOut)
	}
	code, out, errOut := f.run("delete", "pytorchjob/done", "tj")
	if diff := cmp.Diff("pytorchjob done deleted\ntrainjob tj deleted\n", out); code != 0 || diff != "" {
		t.Errorf("delete: exit %d, %s, stdout (-want +got):\n%s", code, errOut, diff)
	}
	var pjs kubeflowv1.PyTorchJobList
	if err := f.c.List(context.Background(), &pjs); err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, j := range pjs.Items {
		left = append(left, j.Name)
	}
	if diff := cmp.Diff([]string{"broken", "mnist"}, left); diff != "" {
		t.Errorf("PyTorchJobs left (-want +got):\n%s", diff)
	}
	if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "tj"}, &trainer.TrainJob{}); err == nil {
		t.Error("TrainJob tj is still there")
	}
}

func TestPyTorchJobCommandErrors(t *testing.T) {
	f := pyTorchJobCluster(t)
	cases := []struct {
		args     []string
		code     int
		inStderr string
	}{
		{[]string{"get", "job/mnist"}, ExitUsage, `unknown kind "job"`},
		{[]string{"get", "--kind", "notakind"}, ExitUsage, `--kind "notakind": want trainjob, pytorchjob, mpijob, xgboostjob or optimizationjob`},
		{[]string{"get", "--kind", "pytorchjob", "--runtime", "x"}, ExitUsage, "PyTorchJobs have no runtime"},
		{[]string{"get", "pytorchjob/nope"}, ExitFailed, `reading PyTorchJob ns/nope`},
		{[]string{"logs", "pytorchjob/mnist", "--node", "1"}, ExitUsage, "--node is a TrainJob's node"},
		{[]string{"logs", "pytorchjob/mnist", "--step", "node-1x"}, ExitUsage, `--step "node-1x": a PyTorchJob's replica is master-0 or worker-N`},
		{[]string{"logs", "pytorchjob/nope"}, ExitFailed, "reading PyTorchJob ns/nope"},
		{[]string{"events", "pytorchjob/nope"}, ExitFailed, "reading PyTorchJob ns/nope"},
		{[]string{"delete", "pytorchjob/nope"}, ExitFailed, "deleting PyTorchJob ns/nope"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, _, errOut := f.run(tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.inStderr) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, errOut, tc.code, tc.inStderr)
			}
		})
	}
}
