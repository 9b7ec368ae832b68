package resources_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
	"github.com/trainyard/trainyard/pkg/runtime/plugins"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/resources"
	rtt "github.com/trainyard/trainyard/test/util/rtt"
)

var list = rtt.ResourceList

func TestValidate(t *testing.T) {
	cases := map[string]struct {
		rt   *runtime.Runtime
		job  *trainer.TrainJob
		want []rtt.FieldErr
	}{
		"no resourcesPerNode": {
			rt:  rtt.MakeTorchRuntime("torch").TrainerResources(rtt.Limits("cpu", "1")).Obj(),
			job: rtt.MakeTrainJob("ns", "job").NumNodes(2).Obj(),
		},
		"no trainer": {
			rt:  rtt.MakeTorchRuntime("torch").Obj(),
			job: rtt.MakeTrainJob("ns", "job").Obj(),
		},
		"request within the runtime's limit": {
			rt:  rtt.MakeTorchRuntime("torch").TrainerResources(rtt.Limits("cpu", "4")).Obj(),
			job: rtt.MakeTrainJob("ns", "job").ResourcesPerNode(rtt.Requests("cpu", "4")).Obj(),
		},
		"request above the runtime's limit after merging": {
			rt:   rtt.MakeTorchRuntime("torch").TrainerResources(rtt.Limits("cpu", "2")).Obj(),
			job:  rtt.MakeTrainJob("ns", "job").ResourcesPerNode(rtt.Requests("cpu", "4")).Obj(),
			want: []rtt.FieldErr{{Type: field.ErrorTypeInvalid, Field: "spec.trainer.resourcesPerNode.requests[cpu]"}},
		},
		"request above the TrainJob's own limit": {
			rt: rtt.MakeTorchRuntime("torch").Obj(),
			job: rtt.MakeTrainJob("ns", "job").ResourcesPerNode(corev1.ResourceRequirements{
				Requests: list("memory", "2Gi"), Limits: list("memory", "1Gi")}).Obj(),
			want: []rtt.FieldErr{{Type: field.ErrorTypeInvalid, Field: "spec.trainer.resourcesPerNode.requests[memory]"}},
		},
		"the TrainJob's limit lowered below the runtime's request": {
			rt:   rtt.MakeTorchRuntime("torch").TrainerResources(rtt.Requests("cpu", "8")).Obj(),
			job:  rtt.MakeTrainJob("ns", "job").ResourcesPerNode(rtt.Limits("cpu", "2")).Obj(),
			want: []rtt.FieldErr{{Type: field.ErrorTypeInvalid, Field: "spec.trainer.resourcesPerNode.requests[cpu]"}},
		},
		"the TrainJob raises both request and limit above the runtime's limit": {
			rt: rtt.MakeTorchRuntime("torch").TrainerResources(rtt.Limits("cpu", "2")).Obj(),
			job: rtt.MakeTrainJob("ns", "job").ResourcesPerNode(corev1.ResourceRequirements{
				Requests: list("cpu", "8"), Limits: list("cpu", "8")}).Obj(),
		},
		"no trainer container to put resources on": {
			rt: rtt.MakeRuntime(trainer.ClusterTrainingRuntimeKind, "plain").ReplicatedJobs(
				rtt.MakeReplicatedJob("node", "trainer", rtt.MakeContainer("main", "x"))).Obj(),
			job:  rtt.MakeTrainJob("ns", "job").ResourcesPerNode(rtt.Requests("cpu", "1")).Obj(),
			want: []rtt.FieldErr{{Type: field.ErrorTypeInvalid, Field: "spec.trainer.resourcesPerNode"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			info, err := runtime.NewInfo(runtime.TrainJobRequest(tc.job), tc.rt)
			if err != nil {
				t.Fatalf("NewInfo: %v", err)
			}
			got := resources.New().Validate(info, runtime.TrainJobRequest(tc.job))
			if diff := cmp.Diff(tc.want, rtt.FieldErrs(got)); diff != "" {
				t.Errorf("Validate (-want +got):\n%s", diff)
			}
		})
	}
}

// The same check through the whole pipeline: an *InvalidError with the path.
func TestBuildRejectsRequestAboveLimit(t *testing.T) {
	fw, err := plugins.NewFramework()
	if err != nil {
		t.Fatal(err)
	}
	rt := rtt.MakeTorchRuntime("torch").TrainerResources(rtt.Limits("cpu", "2")).Obj()
	job := rtt.MakeTrainJob("ns", "job").ResourcesPerNode(rtt.Requests("cpu", "4")).Obj()
	_, err = fw.Build(runtime.TrainJobRequest(job), rt)
	if !framework.IsInvalid(err) {
		t.Fatalf("Build error = %v, want an InvalidError", err)
	}
	want := []rtt.FieldErr{{Type: field.ErrorTypeInvalid, Field: "spec.trainer.resourcesPerNode.requests[cpu]"}}
	if diff := cmp.Diff(want, rtt.FieldErrsOf(err)); diff != "" {
		t.Errorf("Build error (-want +got):\n%s", diff)
	}
}

func TestEnforceMLPolicy(t *testing.T) {
	cases := map[string]struct {
		rt      *runtime.Runtime
		job     *trainer.TrainJob
		want    corev1.ResourceRequirements
		wantErr []rtt.FieldErr
	}{
		"merged into the node container": {
			rt:  rtt.MakeTorchRuntime("torch").TrainerResources(rtt.Limits("nvidia.com/gpu", "4")).Obj(),
			job: rtt.MakeTrainJob("ns", "job").ResourcesPerNode(rtt.Requests("memory", "1Gi")).Obj(),
			want: corev1.ResourceRequirements{
				Requests: list("memory", "1Gi", "nvidia.com/gpu", "4"),
				Limits:   list("nvidia.com/gpu", "4"),
			},
		},
		"no resourcesPerNode leaves the runtime's resources as they are": {
			rt:   rtt.MakeTorchRuntime("torch").TrainerResources(rtt.Limits("nvidia.com/gpu", "4")).Obj(),
			job:  rtt.MakeTrainJob("ns", "job").NumNodes(2).Obj(),
			want: rtt.Limits("nvidia.com/gpu", "4"),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			info, err := runtime.NewInfo(runtime.TrainJobRequest(tc.job), tc.rt)
			if err != nil {
				t.Fatalf("NewInfo: %v", err)
			}
			err = resources.New().EnforceMLPolicy(info, runtime.TrainJobRequest(tc.job))
			if diff := cmp.Diff(tc.wantErr, rtt.FieldErrsOf(err)); diff != "" {
				t.Fatalf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, info.TrainerContainer().Resources); diff != "" {
				t.Errorf("resources (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEnforceMLPolicyWithoutTrainerContainer(t *testing.T) {
	rt := rtt.MakeRuntime(trainer.ClusterTrainingRuntimeKind, "plain").ReplicatedJobs(
		rtt.MakeReplicatedJob("node", "trainer", rtt.MakeContainer("main", "x"))).Obj()
	job := rtt.MakeTrainJob("ns", "job").ResourcesPerNode(rtt.Requests("cpu", "1")).Obj()
	info, err := runtime.NewInfo(runtime.TrainJobRequest(job), rt)
	if err != nil {
		t.Fatal(err)
	}
	want := []rtt.FieldErr{{Type: field.ErrorTypeInvalid, Field: "spec.trainer.resourcesPerNode"}}
	if diff := cmp.Diff(want, rtt.FieldErrsOf(resources.New().EnforceMLPolicy(info, runtime.TrainJobRequest(job)))); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
}

// The controller writes the error into the TrainJob's status and compares it with
// the previous one to decide whether anything changed, so the same TrainJob must
// always give the same errors in the same order.
func TestValidateIsDeterministic(t *testing.T) {
	rt := rtt.MakeTorchRuntime("torch").Obj()
	job := rtt.MakeTrainJob("ns", "job").ResourcesPerNode(corev1.ResourceRequirements{
		Requests: list("cpu", "4", "memory", "2Gi", "nvidia.com/gpu", "2", "ephemeral-storage", "2Gi"),
		Limits:   list("cpu", "2", "memory", "1Gi", "nvidia.com/gpu", "1", "ephemeral-storage", "1Gi"),
	}).Obj()
	info, err := runtime.NewInfo(runtime.TrainJobRequest(job), rt)
	if err != nil {
		t.Fatal(err)
	}
	want := []rtt.FieldErr{
		{Type: field.ErrorTypeInvalid, Field: "spec.trainer.resourcesPerNode.requests[cpu]"},
		{Type: field.ErrorTypeInvalid, Field: "spec.trainer.resourcesPerNode.requests[ephemeral-storage]"},
		{Type: field.ErrorTypeInvalid, Field: "spec.trainer.resourcesPerNode.requests[memory]"},
		{Type: field.ErrorTypeInvalid, Field: "spec.trainer.resourcesPerNode.requests[nvidia.com/gpu]"},
	}
	for i := 0; i < 20; i++ {
		got := rtt.FieldErrs(resources.New().Validate(info, runtime.TrainJobRequest(job)))
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("run %d: Validate (-want sorted by resource name +got):\n%s", i, diff)
		}
	}
}
