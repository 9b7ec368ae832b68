package pytorchjob

import (
	"fmt"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/plan"
)

// built is a PyTorchJob's plan, sorted by kind.
type built struct {
	JobSet   *jobsetv1alpha2.JobSet
	Services []*corev1.Service
}

func build(t *testing.T, job *kubeflowv1.PyTorchJob) *built {
	t.Helper()
	fw, err := NewFramework()
	if err != nil {
		t.Fatal(err)
	}
	p, err := Build(fw, Defaulted(job))
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	res := &built{JobSet: p.JobSet()}
	for _, c := range p.Children {
		switch o := c.Object.(type) {
		case *corev1.Service:
			if c.Rule != plan.RuleCreateOnce {
				t.Errorf("Service %s has rule %s, want %s", o.Name, c.Rule, plan.RuleCreateOnce)
			}
			res.Services = append(res.Services, o)
		case *jobsetv1alpha2.JobSet:
		default:
			t.Fatalf("plan has an unexpected %T", o)
		}
	}
	return res
}

func rjobNames(js *jobsetv1alpha2.JobSet) []string {
	var out []string
	for _, rj := range js.Spec.ReplicatedJobs {
		out = append(out, rj.Name)
	}
	return out
}

// The mnist example becomes one JobSet named after the job: a master and one
// replicated job per worker, each one pod with v1's labels and environment.
func TestBuildMnist(t *testing.T) {
	job := mnist(2, func(j *kubeflowv1.PyTorchJob) {
		j.Spec.PyTorchReplicaSpecs["Master"].Template.Spec.Containers[0].Env = env("EPOCHS", "1")
	})
	res := build(t, job)
	js := res.JobSet

	if diff := cmp.Diff(metav1.ObjectMeta{Name: "mnist", Namespace: "ns", Labels: map[string]string{
		"training.kubeflow.org/job-name": "mnist", "training.kubeflow.org/operator-name": "pytorchjob-controller",
	}}, js.ObjectMeta); diff != "" {
		t.Errorf("JobSet metadata (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"master", "worker-0", "worker-1"}, rjobNames(js)); diff != "" {
		t.Errorf("replicated jobs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(jobsetv1alpha2.JobSetSpec{
		Network:       &jobsetv1alpha2.Network{EnableDNSHostnames: ptr.To(false)},
		FailurePolicy: &jobsetv1alpha2.FailurePolicy{MaxRestarts: 0},
		SuccessPolicy: &jobsetv1alpha2.SuccessPolicy{Operator: jobsetv1alpha2.OperatorAny, TargetReplicatedJobs: []string{"master"}},
		Suspend:       ptr.To(false),
	}, js.Spec, cmpIgnoreReplicatedJobs); diff != "" {
		t.Errorf("JobSet spec (-want +got):\n%s", diff)
	}

	masterLabels := map[string]string{
		"training.kubeflow.org/job-name": "mnist", "training.kubeflow.org/operator-name": "pytorchjob-controller",
		"training.kubeflow.org/replica-type": "master", "training.kubeflow.org/replica-index": "0",
		"training.kubeflow.org/job-role": "master", "job-role": "master",
		"group-name": "kubeflow.org", "replica-type": "master", "replica-index": "0",
		"pytorch_job_name": "mnist", "pytorch-job-name": "mnist",
	}
	wantMaster := jobsetv1alpha2.ReplicatedJob{
		Name:     "master",
		Replicas: 1,
		Template: batchv1.JobTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: masterLabels},
			Spec: batchv1.JobSpec{
				Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1), CompletionMode: ptr.To(batchv1.NonIndexedCompletion),
				BackoffLimit: ptr.To[int32](math.MaxInt32),
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: masterLabels, Annotations: map[string]string{"sidecar.istio.io/inject": "false"}},
					Spec: corev1.PodSpec{
						RestartPolicy: corev1.RestartPolicyOnFailure,
						Hostname:      "mnist-master-0", // v1's pod name, MASTER_ADDR
						Containers: []corev1.Container{{
							Name: "pytorch", Image: "kubeflow/pytorch-dist-mnist:latest", Args: []string{"--backend", "nccl"},
							Resources: job.Spec.PyTorchReplicaSpecs["Master"].Template.Spec.Containers[0].Resources,
							Ports:     []corev1.ContainerPort{{Name: "pytorchjob-port", ContainerPort: 23456}},
							Env: env("EPOCHS", "1", // the user's variables first, then v1's
								"PYTHONUNBUFFERED", "1", "MASTER_PORT", "23456", "PET_MASTER_PORT", "23456",
								"MASTER_ADDR", "mnist-master-0", "PET_MASTER_ADDR", "mnist-master-0",
								"WORLD_SIZE", "3", "RANK", "0", "PET_NODE_RANK", "0", "PET_NPROC_PER_NODE", "auto", "PET_NNODES", "3"),
						}},
					},
				},
			},
		},
	}
	if diff := cmp.Diff(wantMaster, js.Spec.ReplicatedJobs[0]); diff != "" {
		t.Errorf("master replicated job (-want +got):\n%s", diff)
	}

	w1 := js.Spec.ReplicatedJobs[2].Template.Spec.Template
	if diff := cmp.Diff(map[string]string{
		"training.kubeflow.org/job-name": "mnist", "training.kubeflow.org/operator-name": "pytorchjob-controller",
		"training.kubeflow.org/replica-type": "worker", "training.kubeflow.org/replica-index": "1",
		"group-name": "kubeflow.org", "replica-type": "worker", "replica-index": "1",
		"pytorch_job_name": "mnist", "pytorch-job-name": "mnist",
	}, w1.Labels); diff != "" {
		t.Errorf("worker-1 pod labels (-want +got):\n%s", diff)
	}
	if got := envValue(w1.Spec.Containers[0].Env, "RANK"); got != "2" {
		t.Errorf("worker-1 RANK = %q, want 2", got)
	}
	if w1.Spec.Hostname != "mnist-worker-1" {
		t.Errorf("worker-1 host name %q, want v1's mnist-worker-1", w1.Spec.Hostname)
	}

	var names []string
	for _, s := range res.Services {
		names = append(names, s.Name)
	}
	if diff := cmp.Diff([]string{"mnist-master-0", "mnist-worker-0", "mnist-worker-1"}, names); diff != "" {
		t.Errorf("Services (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(corev1.ServiceSpec{
		ClusterIP: corev1.ClusterIPNone, PublishNotReadyAddresses: true,
		Selector: map[string]string{
			"training.kubeflow.org/job-name": "mnist", "training.kubeflow.org/operator-name": "pytorchjob-controller",
			"training.kubeflow.org/replica-type": "worker", "training.kubeflow.org/replica-index": "1",
		},
		Ports: []corev1.ServicePort{{Name: "pytorchjob-port", Port: 23456, Protocol: corev1.ProtocolTCP}},
	}, res.Services[2].Spec); diff != "" {
		t.Errorf("Service mnist-worker-1 (-want +got):\n%s", diff)
	}
}

var cmpIgnoreReplicatedJobs = cmp.FilterPath(func(p cmp.Path) bool { return p.String() == "ReplicatedJobs" }, cmp.Ignore())

func envValue(env []corev1.EnvVar, name string) string {
	for _, e := range env {
		if e.Name == name {
			return e.Value
		}
	}
	return "<unset>"
}

// v1's restart policies map onto the Job that runs each replica.
func TestBuildRestartPolicies(t *testing.T) {
	exitCode := &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
		{Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
			ContainerName: ptr.To("pytorch"), Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: seq(1, 127)}},
		{Action: batchv1.PodFailurePolicyActionCount, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
			ContainerName: ptr.To("pytorch"), Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: seq(128, 255)}},
	}}
	type want struct {
		restart corev1.RestartPolicy
		backoff int32
		pfp     *batchv1.PodFailurePolicy
	}
	cases := map[string]struct {
		policy  kubeflowv1.RestartPolicy
		backoff *int32
		want    want
	}{
		"OnFailure, no backoffLimit: restarts without limit": {kubeflowv1.RestartPolicyOnFailure, nil, want{corev1.RestartPolicyOnFailure, math.MaxInt32, nil}},
		"OnFailure with backoffLimit":                        {kubeflowv1.RestartPolicyOnFailure, ptr.To[int32](3), want{corev1.RestartPolicyOnFailure, 3, nil}},
		"Always restarts in place like OnFailure":            {kubeflowv1.RestartPolicyAlways, ptr.To[int32](2), want{corev1.RestartPolicyOnFailure, 2, nil}},
		"Never: the first failure fails the job":             {kubeflowv1.RestartPolicyNever, ptr.To[int32](5), want{corev1.RestartPolicyNever, 0, nil}},
		"ExitCode: pod failure policy on pytorch":            {kubeflowv1.RestartPolicyExitCode, ptr.To[int32](4), want{corev1.RestartPolicyNever, 4, exitCode}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			res := build(t, mnist(1, func(j *kubeflowv1.PyTorchJob) {
				j.Spec.RunPolicy.BackoffLimit = tc.backoff
				j.Spec.PyTorchReplicaSpecs["Worker"].RestartPolicy = tc.policy
				j.Spec.PyTorchReplicaSpecs["Worker"].Template.Spec.RestartPolicy = corev1.RestartPolicyAlways // overwritten
			}))
			js := res.JobSet.Spec.ReplicatedJobs[1].Template.Spec
			got := want{js.Template.Spec.RestartPolicy, *js.BackoffLimit, js.PodFailurePolicy}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("worker Job (-want +got):\n%s", diff)
			}
		})
	}
}

func seq(lo, hi int32) []int32 {
	var out []int32
	for v := lo; v <= hi; v++ {
		out = append(out, v)
	}
	return out
}

// Jobs without a Master: worker 0 is the master role; the JobSet succeeds
// when all workers have, or, elastic, when any has. Elastic workers, too, run
// one Job each, with v1's host name: the c10d rendezvous is hosted by the agent
// whose host name is the endpoint's host, <job>-worker-0.
func TestBuildWithoutMaster(t *testing.T) {
	t.Run("not elastic", func(t *testing.T) {
		res := build(t, mnist(2, func(j *kubeflowv1.PyTorchJob) { delete(j.Spec.PyTorchReplicaSpecs, "Master") }))
		js := res.JobSet
		if diff := cmp.Diff([]string{"worker-0", "worker-1"}, rjobNames(js)); diff != "" {
			t.Errorf("replicated jobs (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(&jobsetv1alpha2.SuccessPolicy{Operator: jobsetv1alpha2.OperatorAll}, js.Spec.SuccessPolicy); diff != "" {
			t.Errorf("success policy (-want +got):\n%s", diff)
		}
		if got := js.Spec.ReplicatedJobs[0].Template.Spec.Template.Labels["training.kubeflow.org/job-role"]; got != "master" {
			t.Errorf("worker-0 job-role = %q, want master", got)
		}
		if _, ok := js.Spec.ReplicatedJobs[1].Template.Spec.Template.Labels["training.kubeflow.org/job-role"]; ok {
			t.Errorf("worker-1 has a job-role label")
		}
	})
	t.Run("elastic", func(t *testing.T) {
		res := build(t, elastic(3))
		js := res.JobSet
		if diff := cmp.Diff([]string{"worker-0", "worker-1", "worker-2"}, rjobNames(js)); diff != "" {
			t.Fatalf("replicated jobs (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(&jobsetv1alpha2.SuccessPolicy{Operator: jobsetv1alpha2.OperatorAny}, js.Spec.SuccessPolicy); diff != "" {
			t.Errorf("success policy (-want +got):\n%s", diff)
		}
		endpoint := envValue(js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].Env, "PET_RDZV_ENDPOINT")
		if endpoint != "mnist-worker-0:23456" {
			t.Errorf("PET_RDZV_ENDPOINT = %q, want mnist-worker-0:23456", endpoint)
		}
		for i, rj := range js.Spec.ReplicatedJobs {
			spec := rj.Template.Spec
			if *spec.Parallelism != 1 || *spec.Completions != 1 || *spec.CompletionMode != batchv1.NonIndexedCompletion {
				t.Errorf("%s: parallelism %d, completions %d, mode %s; want 1, 1, NonIndexed", rj.Name, *spec.Parallelism, *spec.Completions, *spec.CompletionMode)
			}
			pod := spec.Template
			if want := fmt.Sprintf("mnist-worker-%d", i); pod.Spec.Hostname != want {
				t.Errorf("%s: host name %q, want %q", rj.Name, pod.Spec.Hostname, want)
			}
			if got := pod.Labels["training.kubeflow.org/replica-index"]; got != fmt.Sprint(i) {
				t.Errorf("%s: replica-index %q", rj.Name, got)
			}
			if got := envValue(pod.Spec.Containers[0].Env, "PET_NNODES"); got != "1:3" {
				t.Errorf("%s: PET_NNODES = %q, want 1:3", rj.Name, got)
			}
			for _, name := range []string{"RANK", "WORLD_SIZE", "MASTER_ADDR"} {
				if got := envValue(pod.Spec.Containers[0].Env, name); got != "<unset>" {
					t.Errorf("%s: %s=%q without a Master", rj.Name, name, got)
				}
			}
		}
		if got := js.Spec.ReplicatedJobs[0].Template.Spec.Template.Labels["training.kubeflow.org/job-role"]; got != "master" {
			t.Errorf("worker-0 job-role = %q, want master", got)
		}
		if len(res.Services) != 3 {
			t.Fatalf("got %d Services, want 3", len(res.Services))
		}
		if diff := cmp.Diff(map[string]string{
			"training.kubeflow.org/job-name": "mnist", "training.kubeflow.org/operator-name": "pytorchjob-controller",
			"training.kubeflow.org/replica-type": "worker", "training.kubeflow.org/replica-index": "0",
		}, res.Services[0].Spec.Selector); diff != "" {
			t.Errorf("Service mnist-worker-0 selector (-want +got):\n%s", diff)
		}
	})
}

// A host name in the replica's template stays, as v1 kept it.
func TestBuildKeepsTemplateHostname(t *testing.T) {
	res := build(t, mnist(1, func(j *kubeflowv1.PyTorchJob) {
		j.Spec.PyTorchReplicaSpecs["Worker"].Template.Spec.Hostname = "mine"
	}))
	if got := res.JobSet.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.Hostname; got != "mine" {
		t.Errorf("worker host name %q, want the template's", got)
	}
	if got := res.JobSet.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Hostname; got != "mnist-master-0" {
		t.Errorf("master host name %q", got)
	}
}

// What Kueue writes into a replica's template before it resumes a job reaches
// the JobSet, and the JobSet follows runPolicy.suspend.
func TestBuildCarriesKueueChangesAndSuspend(t *testing.T) {
	res := build(t, mnist(1, func(j *kubeflowv1.PyTorchJob) {
		j.Labels = map[string]string{"kueue.x-k8s.io/queue-name": "gpu-queue"}
		j.Spec.RunPolicy.Suspend = ptr.To(true)
		w := j.Spec.PyTorchReplicaSpecs["Worker"]
		w.Template.Labels = map[string]string{"kueue.x-k8s.io/podset": "worker"}
		w.Template.Spec.NodeSelector = map[string]string{"cloud.example.com/gpu": "a100"}
		w.Template.Spec.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
	}))
	if !*res.JobSet.Spec.Suspend {
		t.Errorf("JobSet not suspended")
	}
	pod := res.JobSet.Spec.ReplicatedJobs[1].Template.Spec.Template
	if pod.Labels["kueue.x-k8s.io/podset"] != "worker" || pod.Spec.NodeSelector["cloud.example.com/gpu"] != "a100" || len(pod.Spec.Tolerations) != 1 {
		t.Errorf("worker pod template lost Kueue's changes: labels %v, nodeSelector %v, tolerations %v", pod.Labels, pod.Spec.NodeSelector, pod.Spec.Tolerations)
	}
	if got := res.JobSet.Labels["kueue.x-k8s.io/queue-name"]; got != "" {
		t.Errorf("JobSet carries a queue label %q: Kueue would queue it twice", got)
	}
}
