package plugins_test

import (
	"path/filepath"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/observe"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
	"github.com/trainyard/trainyard/pkg/runtime/plugins"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/torch"
	rtt "github.com/trainyard/trainyard/test/util/rtt"
)

func TestOrdered(t *testing.T) {
	var names []string
	for _, p := range plugins.Ordered(plugins.Options{}) {
		names = append(names, p.Name())
	}
	// Resources before the ML policies (they read merged resources), JobSet last.
	if diff := cmp.Diff([]string{"Resources", "Initializer", "Torch", "MPI", "JAX", "XGBoost", "Flux", "TrainJobStatus", "Kueue", "CoScheduling", "Volcano", "JobSet"}, names); diff != "" {
		t.Errorf("Ordered (-want +got):\n%s", diff)
	}
	fw, err := plugins.NewFramework()
	if err != nil {
		t.Fatalf("NewFramework: %v", err)
	}
	if diff := cmp.Diff(names, fw.Names()); diff != "" {
		t.Errorf("NewFramework names (-want +got):\n%s", diff)
	}
}

// The torch plugin gets the cluster domain of the options, cluster.local by default.
func TestOrderedClusterDomain(t *testing.T) {
	for _, tc := range []struct{ domain, want string }{{"", "cluster.local"}, {"corp.example", "corp.example"}} {
		var got []string
		for _, p := range plugins.Ordered(plugins.Options{ClusterDomain: tc.domain}) {
			if tp, ok := p.(*torch.Torch); ok {
				got = append(got, tp.ClusterDomain)
			}
		}
		if diff := cmp.Diff([]string{tc.want}, got); diff != "" {
			t.Errorf("ClusterDomain %q: the torch plugin's domain (-want +got):\n%s", tc.domain, diff)
		}
	}
}

func torchJobSet(job string, nodes int32, nproc string, c func(*corev1.Container)) *jobsetv1alpha2.JobSet {
	node := corev1.Container{
		Name:  "node",
		Image: "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime",
		Env: []corev1.EnvVar{
			{Name: "PET_NNODES", Value: itoa(nodes)},
			{Name: "PET_NPROC_PER_NODE", Value: nproc},
			{Name: "PET_NODE_RANK", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
				FieldPath: "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}},
			{Name: "PET_MASTER_ADDR", Value: job + "-node-0-0." + job},
			{Name: "PET_MASTER_PORT", Value: "29500"},
		},
		Ports: []corev1.ContainerPort{{ContainerPort: 29500, Protocol: corev1.ProtocolTCP}},
	}
	if c != nil {
		c(&node)
	}
	return &jobsetv1alpha2.JobSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet"},
		ObjectMeta: metav1.ObjectMeta{Name: job, Namespace: "default"},
		Spec: jobsetv1alpha2.JobSetSpec{
			Network: &jobsetv1alpha2.Network{PublishNotReadyAddresses: ptr.To(true)},
			ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{
				Name:     "node",
				Replicas: 1,
				Template: batchv1.JobTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
					Spec: batchv1.JobSpec{
						Parallelism:    ptr.To(nodes),
						Completions:    ptr.To(nodes),
						CompletionMode: ptr.To(batchv1.IndexedCompletion),
						Template:       corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{node}}},
					},
				},
			}},
			Suspend: ptr.To(false),
		},
	}
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

// The shipped example on the shipped runtime, end to end.
func TestBuildShippedExample(t *testing.T) {
	rt, err := rtt.TorchDistributedRuntime()
	if err != nil {
		t.Fatal(err)
	}
	job, err := rtt.LoadTrainJobFile(filepath.Join(rtt.RepoRoot(), "examples", "trainjob-torch.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	job.Namespace = "default"
	fw, err := plugins.NewFramework()
	if err != nil {
		t.Fatal(err)
	}
	built, err := fw.Build(runtime.TrainJobRequest(job), rt)
	objs := built.Objects()
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if len(objs) != 1 {
		t.Fatalf("Build returned %d objects, want one JobSet", len(objs))
	}
	want := torchJobSet("torch-allreduce", 2, "1", func(c *corev1.Container) {
		c.Command = job.Spec.Trainer.Command
		c.Resources = corev1.ResourceRequirements{
			Requests: rtt.ResourceList("cpu", "1", "memory", "1Gi"),
			Limits:   rtt.ResourceList("cpu", "1", "memory", "1Gi"),
		}
	})
	if diff := cmp.Diff(want, objs[0]); diff != "" {
		t.Errorf("JobSet (-want +got):\n%s", diff)
	}
}

func TestBuildTorchDistributed(t *testing.T) {
	rt := rtt.MustTorchDistributedRuntime()
	cases := map[string]struct {
		job     *trainer.TrainJob
		rt      *runtime.Runtime
		want    *jobsetv1alpha2.JobSet
		wantErr []rtt.FieldErr
	}{
		"defaults: one node, one process": {
			job:  rtt.MakeTrainJob("default", "job").Obj(),
			want: torchJobSet("job", 1, "1", nil),
		},
		"GPUs per node and nodes from the TrainJob, suspended": {
			job: rtt.MakeTrainJob("default", "big").NumNodes(4).Suspend(true).
				ResourcesPerNode(rtt.Limits("nvidia.com/gpu", "8")).Obj(),
			want: func() *jobsetv1alpha2.JobSet {
				js := torchJobSet("big", 4, "8", func(c *corev1.Container) {
					c.Resources = corev1.ResourceRequirements{Requests: rtt.ResourceList("nvidia.com/gpu", "8"), Limits: rtt.ResourceList("nvidia.com/gpu", "8")}
				})
				js.Spec.Suspend = ptr.To(true)
				return js
			}(),
		},
		"integer processes per node": {
			job:  rtt.MakeTrainJob("default", "job").NumProcPerNode(intstr.FromInt32(3)).Obj(),
			want: torchJobSet("job", 1, "3", nil),
		},
		"reserved env": {
			job:     rtt.MakeTrainJob("default", "job").Env(rtt.Env("MASTER_ADDR", "x")).Obj(),
			wantErr: []rtt.FieldErr{{Type: field.ErrorTypeInvalid, Field: "spec.trainer.env[0].name"}},
		},
		"gpu processes without GPUs": {
			job:     rtt.MakeTrainJob("default", "job").NumProcPerNode(intstr.FromString("gpu")).Obj(),
			wantErr: []rtt.FieldErr{{Type: field.ErrorTypeInvalid, Field: "spec.trainer.numProcPerNode"}},
		},
	}
	fw, err := plugins.NewFramework()
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := tc.rt
			if r == nil {
				r = rt
			}
			built, err := fw.Build(runtime.TrainJobRequest(tc.job), r)
			objs := built.Objects()
			if diff := cmp.Diff(tc.wantErr, rtt.FieldErrsOf(err)); diff != "" {
				t.Fatalf("error (-want +got):\n%s", diff)
			}
			if err != nil {
				if !framework.IsInvalid(err) {
					t.Errorf("error %v is not an InvalidError", err)
				}
				return
			}
			if diff := cmp.Diff([]any{tc.want}, toAny(objs)); diff != "" {
				t.Errorf("objects (-want +got):\n%s", diff)
			}
		})
	}
}

func toAny[T any](in []T) []any {
	out := make([]any, 0, len(in))
	for _, v := range in {
		out = append(out, v)
	}
	return out
}

// Status goes through the framework to the JobSet plugin.
func TestStatusThroughFramework(t *testing.T) {
	fw, err := plugins.NewFramework()
	if err != nil {
		t.Fatal(err)
	}
	js := torchJobSet("job", 2, "1", nil)
	js.Status = jobsetv1alpha2.JobSetStatus{
		Conditions:           []metav1.Condition{{Type: "Completed", Status: metav1.ConditionTrue, Reason: "AllJobsCompleted", Message: "jobset completed successfully"}},
		ReplicatedJobsStatus: []jobsetv1alpha2.ReplicatedJobStatus{{Name: "node", Succeeded: 1}},
	}
	got := fw.Status("job", rtt.ObservedJobSet(js))
	want := framework.Facts{
		Finished: &observe.Finish{Reason: "AllJobsCompleted", Message: "jobset completed successfully"},
		Jobs:     []observe.JobCounts{{Name: "node", Succeeded: 1}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("facts (-want +got):\n%s", diff)
	}
}
