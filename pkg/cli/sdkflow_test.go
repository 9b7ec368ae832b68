package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/controller/trainjob"
)

// `runtimes NAME` shows one runtime as GetRuntime finds it: the namespace's
// TrainingRuntime first, else the ClusterTrainingRuntime.
func TestRuntimesNameCommand(t *testing.T) {
	shadow := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "torch-gpu", Labels: map[string]string{trainer.FrameworkLabel: "mine"}},
		Spec: runtimeSpec(nil, limits("cpu", "2"))}
	f := newFakeCluster(t, append(catalog(), shadow)...)
	cases := []struct {
		name    string
		args    []string
		code    int
		out     string
		inError string
	}{
		{
			name: "a ClusterTrainingRuntime",
			args: []string{"runtimes", "torch-distributed"},
			out: `NAME               KIND                    FRAMEWORK  NODES  DEVICE   DEVICE COUNT  ENTRYPOINT
torch-distributed  ClusterTrainingRuntime  torch      1      Unknown  Unknown       torchrun
`,
		},
		{
			name: "the namespace's TrainingRuntime before the ClusterTrainingRuntime of the same name",
			args: []string{"runtimes", "torch-gpu"},
			out: `NAME          KIND             FRAMEWORK  NODES  DEVICE  DEVICE COUNT  ENTRYPOINT
ns/torch-gpu  TrainingRuntime  mine       1      cpu     2             python3
`,
		},
		{
			name: "another namespace sees the ClusterTrainingRuntime",
			args: []string{"-n", "other", "runtimes", "torch-gpu", "-o", "yaml"},
			out: `device: gpu
deviceCount: "8"
entrypoint: torchrun
framework: torch
image: img
kind: ClusterTrainingRuntime
name: torch-gpu
numNodes: 2
`,
		},
		{
			name:    "missing: both places named",
			args:    []string{"runtimes", "nope"},
			code:    ExitFailed,
			inError: `runtime "nope" not found: no TrainingRuntime in namespace ns and no ClusterTrainingRuntime`,
		},
		{name: "two names", args: []string{"runtimes", "a", "b"}, code: ExitUsage, inError: "at most one runtime name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := f.run(tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.inError) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, errOut, tc.code, tc.inError)
			}
			if diff := cmp.Diff(tc.out, out); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
		})
	}
	// An unlabelled runtime is shown, with a warning.
	code, out, errOut := f.run("runtimes", "unlabelled", "-o", "json")
	var rt Runtime
	if code != 0 || json.Unmarshal([]byte(out), &rt) != nil || rt.Name != "unlabelled" || !strings.Contains(errOut, "has no trainer.kubeflow.org/framework label") {
		t.Errorf("runtimes unlabelled: exit %d, %q, %q", code, out, errOut)
	}
}

func TestGetRuntimeFilter(t *testing.T) {
	onGPU := trainJob("gamma", trainer.TrainJobStatus{Phase: "Running"})
	onGPU.Spec.RuntimeRef.Name = "torch-gpu"
	f := newFakeCluster(t, append(catalog(), trainJob("alpha", trainer.TrainJobStatus{Phase: "Pending"}), onGPU)...)
	cases := []struct {
		args  []string
		names []string
	}{
		{[]string{"get", "-o", "json"}, []string{"alpha", "gamma"}},
		{[]string{"get", "--runtime", "torch-gpu", "-o", "json"}, []string{"gamma"}},
		{[]string{"get", "--runtime", "torch-distributed", "-o", "json"}, []string{"alpha"}},
		{[]string{"get", "--runtime", "mine", "-o", "json"}, []string{}},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := f.run(tc.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			var jobs []trainjob.Job
			if err := json.Unmarshal([]byte(out), &jobs); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			names := []string{}
			for _, j := range jobs {
				names = append(names, j.Name)
			}
			if diff := cmp.Diff(tc.names, names); diff != "" {
				t.Errorf("TrainJobs (-want +got):\n%s", diff)
			}
		})
	}
	code, out, errOut := f.run("get", "--runtime", "mine")
	if code != 0 || out != "" || !strings.Contains(errOut, "no TrainJobs on runtime mine in namespace ns") {
		t.Errorf("get --runtime mine: exit %d, %q, %q", code, out, errOut)
	}
	code, out, _ = f.run("get", "--runtime", "torch-gpu")
	if code != 0 || !strings.Contains(out, "gamma") || strings.Contains(out, "alpha") {
		t.Errorf("get --runtime torch-gpu: exit %d:\n%s", code, out)
	}
	if code, _, errOut = f.run("get", "alpha", "--runtime", "x"); code != ExitUsage || !strings.Contains(errOut, "does not go with a job name") {
		t.Errorf("get NAME --runtime: exit %d: %s", code, errOut)
	}
}

func TestParseStatuses(t *testing.T) {
	cases := []struct {
		in      string
		want    map[string]bool
		wantErr string
	}{
		{in: "Complete", want: map[string]bool{"Complete": true}},
		{in: "running, complete,FAILED", want: map[string]bool{"Running": true, "Complete": true, "Failed": true}},
		{in: "Created,Pending,Suspended", want: map[string]bool{"Created": true, "Pending": true, "Suspended": true}},
		{in: "Succeeded", wantErr: `unknown status "Succeeded"`},
		{in: " , ", wantErr: "no status"},
	}
	for _, tc := range cases {
		got, err := parseStatuses(tc.in, trainjob.Statuses)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: error %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.in, diff)
		}
	}
}

func TestWaitFor(t *testing.T) {
	complete := trainer.TrainJobStatus{Phase: "Complete", Reason: "AllJobsCompleted",
		Conditions: []metav1.Condition{cond("Complete", metav1.ConditionTrue, "AllJobsCompleted", "jobset completed successfully")}}
	failed := trainer.TrainJobStatus{Phase: "Failed", Reason: "FailedJobs", Message: "node-1 failed",
		Conditions: []metav1.Condition{cond("Failed", metav1.ConditionTrue, "FailedJobs", "node-1 failed")}}
	f := newFakeCluster(t,
		trainJob("new", trainer.TrainJobStatus{}),
		trainJob("pending", trainer.TrainJobStatus{Phase: "Pending"}),
		trainJob("running", trainer.TrainJobStatus{Phase: "Running", Reason: "AllNodesStarted", NumNodes: ptr.To[int32](2), ReadyNodes: ptr.To[int32](2)}),
		trainJob("suspended", trainer.TrainJobStatus{Phase: "Suspended"}),
		trainJob("done", complete),
		trainJob("broken", failed),
	)
	cases := []struct {
		job, statuses string
		code          int
		inStderr      string
	}{
		{"running", "Running", ExitOK, ""},
		{"running", "Running,Complete", ExitOK, ""},
		{"running", "Created", ExitOK, ""},
		{"new", "Created", ExitOK, ""},
		{"pending", "Pending", ExitOK, ""},
		{"suspended", "Suspended", ExitOK, ""},
		{"done", "Running,Complete", ExitOK, ""},
		{"broken", "Complete,Failed", ExitOK, ""},
		{"broken", "Running", ExitFailed, "TrainJob broken Failed: FailedJobs: node-1 failed"},
		{"done", "Running", ExitFailed, "TrainJob done is Complete; it will not be Running"},
		{"done", "Created", ExitFailed, "it will not be Created"},
		{"pending", "Running,Failed", ExitTimeout, "TrainJob pending not Running or Failed after 100ms (last: Pending): timed out"},
		{"new", "Running", ExitTimeout, "not Running after 100ms (last: Created)"},
		{"suspended", "Complete", ExitTimeout, "not finished after 100ms"},
		{"running", "Finished", ExitUsage, `unknown status "Finished"`},
	}
	for _, tc := range cases {
		t.Run(tc.job+" --for "+tc.statuses, func(t *testing.T) {
			code, out, errOut := f.run("wait", tc.job, "--for", tc.statuses, "--timeout", "100ms", "--interval", "20ms")
			if code != tc.code || !strings.Contains(errOut, tc.inStderr) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q\n%s", code, errOut, tc.code, tc.inStderr, out)
			}
		})
	}
	code, out, _ := f.run("wait", "running", "--for", "Running")
	if code != 0 || !strings.Contains(out, "TrainJob running: Running, 2/2 nodes ready (AllNodesStarted)") {
		t.Errorf("wait --for Running: exit %d:\n%s", code, out)
	}
}

// events lists the events of the TrainJob, its JobSet and its pods from both
// event APIs, oldest first, and nothing of other objects.
func TestEventsCommand(t *testing.T) {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	v1Event := func(name, kind, obj, reason, note string, s int) *eventsv1.Event {
		return &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			EventTime: metav1.NewMicroTime(at(s)), Type: "Normal", Reason: reason, Note: note, Action: reason,
			ReportingController: "trainer.kubeflow.org/trainjob-controller", ReportingInstance: "x",
			Regarding: corev1.ObjectReference{Kind: kind, Name: obj, Namespace: "ns"}}
	}
	coreEvent := func(name, kind, obj, typ, reason, msg string, s int, count int32) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Type: typ, Reason: reason, Message: msg,
			FirstTimestamp: metav1.NewTime(at(s - 60)), LastTimestamp: metav1.NewTime(at(s)), Count: count,
			Source:         corev1.EventSource{Component: "default-scheduler"},
			InvolvedObject: corev1.ObjectReference{Kind: kind, Name: obj, Namespace: "ns"}}
	}
	objs := append(catalog(), trainJob("alpha", trainer.TrainJobStatus{Phase: "Running"}), trainJob("beta", trainer.TrainJobStatus{}),
		jobPod("alpha", "0", corev1.PodRunning),
		v1Event("e1", "TrainJob", "alpha", "JobSetCreated", "JobSet ns/alpha created", 1),
		coreEvent("e2", "Pod", "alpha-node-0-0", "Normal", "Scheduled", "Successfully assigned ns/alpha-node-0-0 to n1", 3, 1),
		coreEvent("e3", "JobSet", "alpha", "Warning", "Retry", "restarting\nall jobs", 2, 3),
		v1Event("e4", "TrainJob", "beta", "JobSetCreated", "JobSet ns/beta created", 0),
		coreEvent("e5", "Pod", "beta-node-0-0", "Normal", "Scheduled", "not alpha's", 0, 1),
		coreEvent("e6", "Job", "alpha", "Normal", "Other", "a Job named alpha is not the TrainJob", 0, 1),
	)
	// An Event is the same object in both APIs; it is shown once.
	objs = append(objs, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "e1"}, Reason: "JobSetCreated",
		InvolvedObject: corev1.ObjectReference{Kind: "TrainJob", Name: "alpha"}})
	f := newFakeCluster(t, objs...)

	code, out, errOut := f.run("events", "alpha", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var evs []Event
	if err := json.Unmarshal([]byte(out), &evs); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := []Event{
		{LastSeen: metav1.NewTime(at(1)), FirstSeen: metav1.NewTime(at(1)), Type: "Normal", Reason: "JobSetCreated", Kind: "TrainJob", Object: "alpha",
			Message: "JobSet ns/alpha created", Count: 1, Reporter: "trainer.kubeflow.org/trainjob-controller"},
		{LastSeen: metav1.NewTime(at(2)), FirstSeen: metav1.NewTime(at(-58)), Type: "Warning", Reason: "Retry", Kind: "JobSet", Object: "alpha",
			Message: "restarting\nall jobs", Count: 3, Reporter: "default-scheduler"},
		{LastSeen: metav1.NewTime(at(3)), FirstSeen: metav1.NewTime(at(-57)), Type: "Normal", Reason: "Scheduled", Kind: "Pod", Object: "alpha-node-0-0",
			Message: "Successfully assigned ns/alpha-node-0-0 to n1", Count: 1, Reporter: "default-scheduler"},
	}
	if diff := cmp.Diff(want, evs, cmp.AllowUnexported(Event{}), cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".key" }, cmp.Ignore())); diff != "" {
		t.Errorf("events -o json (-want +got):\n%s", diff)
	}

	var b strings.Builder
	if err := PrintEvents(&b, evs, at(63)); err != nil {
		t.Fatal(err)
	}
	wantTable := `LAST SEEN           TYPE     REASON         OBJECT              MESSAGE
62s                 Normal   JobSetCreated  trainjob/alpha      JobSet ns/alpha created
61s (x3 over 2m1s)  Warning  Retry          jobset/alpha        restarting all jobs
60s                 Normal   Scheduled      pod/alpha-node-0-0  Successfully assigned ns/alpha-node-0-0 to n1
`
	if diff := cmp.Diff(wantTable, b.String()); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
	code, out, _ = f.run("events", "alpha")
	if code != 0 || !strings.HasPrefix(out, "LAST SEEN") || strings.Count(out, "\n") != 4 {
		t.Errorf("events alpha: exit %d:\n%s", code, out)
	}
	code, out, _ = f.run("events", "alpha", "-o", "yaml")
	if code != 0 || yaml.Unmarshal([]byte(out), &evs) != nil || len(evs) != 3 {
		t.Errorf("events -o yaml: exit %d:\n%s", code, out)
	}

	code, _, errOut = f.run("-n", "other", "events", "alpha")
	if code != ExitFailed || !strings.Contains(errOut, "not found") {
		t.Errorf("events in another namespace: exit %d: %s", code, errOut)
	}
	f2 := newFakeCluster(t, trainJob("quiet", trainer.TrainJobStatus{}))
	code, out, errOut = f2.run("events", "quiet")
	if code != 0 || out != "" || !strings.Contains(errOut, "no events of TrainJob quiet in namespace ns") {
		t.Errorf("events quiet: exit %d, %q, %q", code, out, errOut)
	}
	if code, _, errOut = f.run("events"); code != ExitUsage || !strings.Contains(errOut, "one job name") {
		t.Errorf("events without a name: exit %d: %s", code, errOut)
	}
}

// initPod is a pod of the TrainJob's replicated job rj with one container.
func initPod(job, rj, container string, phase corev1.PodPhase) *corev1.Pod {
	p := pod(job+"-"+rj+"-0-0", rj, "", phase, 0, corev1.Container{Name: container})
	p.Namespace = "ns"
	p.Labels["jobset.sigs.k8s.io/jobset-name"] = job
	p.Status.ContainerStatuses = containerStatuses(&p)
	return &p
}

// Initializer pods are steps named as the SDK names them, whether their
// replicated job is named so or labelled so in the JobSet; their logs are
// the --step's.
func TestInitializerSteps(t *testing.T) {
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "alpha"}, Spec: jobsetv1alpha2.JobSetSpec{
		ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{
			{Name: "fetch-data"},
			{Name: "get-model"},
			{Name: "node"},
		}}}
	js.Spec.ReplicatedJobs[0].Template.Labels = map[string]string{trainer.AncestorLabel: trainer.AncestorDatasetInitializer}
	js.Spec.ReplicatedJobs[1].Template.Labels = map[string]string{trainer.AncestorLabel: trainer.AncestorModelInitializer}
	js.Spec.ReplicatedJobs[2].Template.Labels = map[string]string{trainer.AncestorLabel: trainer.AncestorTrainer}
	if diff := cmp.Diff(map[string]string{"fetch-data": "dataset-initializer", "get-model": "model-initializer"}, trainjob.InitializerSteps(js)); diff != "" {
		t.Errorf("InitializerSteps (-want +got):\n%s", diff)
	}
	f := newFakeCluster(t, append(catalog(), trainJob("alpha", trainer.TrainJobStatus{Phase: "Running"}), js,
		initPod("alpha", "fetch-data", "dataset-initializer", corev1.PodSucceeded),
		initPod("alpha", "get-model", "model-initializer", corev1.PodSucceeded),
		initPod("alpha", "sidecar", "other", corev1.PodRunning),
		jobPod("alpha", "0", corev1.PodRunning),
		trainJob("beta", trainer.TrainJobStatus{Phase: "Running"}),
		initPod("beta", "dataset-initializer", "dataset-initializer", corev1.PodRunning),
	)...)
	code, out, errOut := f.run("get", "alpha", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var job trainjob.Job
	if err := json.Unmarshal([]byte(out), &job); err != nil {
		t.Fatal(err)
	}
	var steps []string
	for _, s := range job.Steps {
		steps = append(steps, s.Name+" "+s.Status+" "+s.Pod)
	}
	want := []string{"dataset-initializer Succeeded alpha-fetch-data-0-0", "model-initializer Succeeded alpha-get-model-0-0", "node-0 Running alpha-node-0-0"}
	if diff := cmp.Diff(want, steps); diff != "" {
		t.Errorf("get alpha steps (-want +got):\n%s", diff)
	}
	// The list reads the JobSets too.
	code, out, _ = f.run("get", "-o", "json")
	var jobs []trainjob.Job
	if code != 0 || json.Unmarshal([]byte(out), &jobs) != nil || len(jobs) != 2 || len(jobs[0].Steps) != 3 || len(jobs[1].Steps) != 1 ||
		jobs[1].Steps[0].Name != "dataset-initializer" {
		t.Errorf("get -o json: exit %d:\n%s", code, out)
	}

	cases := []struct {
		args     []string
		code     int
		out      string
		inStderr string
	}{
		{args: []string{"logs", "alpha", "--step", "dataset-initializer"}, out: "[dataset-initializer]: fake logs\n"},
		{args: []string{"logs", "alpha", "--step", "model-initializer"}, out: "[model-initializer]: fake logs\n"},
		{args: []string{"logs", "beta", "--step", "dataset-initializer"}, out: "[dataset-initializer]: fake logs\n"},
		{args: []string{"logs", "beta", "--step", "model-initializer"}, inStderr: "no model-initializer pod of TrainJob beta has started yet"},
		{args: []string{"logs", "alpha", "--step", "node-0"}, out: "[node-0]: fake logs\n"},
		{args: []string{"logs", "alpha"}, out: "[node-0]: fake logs\n"},
		{args: []string{"logs", "alpha", "--step", "trainer"}, code: ExitUsage, inStderr: `--step "trainer": want node-N`},
		{args: []string{"logs", "alpha", "--step", "node-0", "--node", "0"}, code: ExitUsage, inStderr: "give one of them"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := f.run(tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.inStderr) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, errOut, tc.code, tc.inStderr)
			}
			if diff := cmp.Diff(tc.out, out); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
		})
	}
}
