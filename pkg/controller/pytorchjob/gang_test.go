package pytorchjob

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/plan"
)

// runPolicy.schedulingPolicy shapes the PodGroup of the manager's gang
// scheduler; pods without a scheduler get the gang scheduler's.
func TestBuildWithGang(t *testing.T) {
	pg := func(apiVersion string, spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": apiVersion, "kind": "PodGroup",
			"metadata": map[string]any{"name": "mnist", "namespace": "ns"},
			"spec":     spec,
		}}
	}
	policy := func(j *kubeflowv1.PyTorchJob) {
		j.Spec.RunPolicy.SchedulingPolicy = &kubeflowv1.SchedulingPolicy{
			MinAvailable: ptr.To[int32](2), Queue: "research", PriorityClass: "high", ScheduleTimeoutSeconds: ptr.To[int32](90),
			MinResources: &map[corev1.ResourceName]resource.Quantity{"nvidia.com/gpu": resource.MustParse("2")},
		}
	}
	cases := map[string]struct {
		gang          GangScheduler
		job           *kubeflowv1.PyTorchJob
		want          *unstructured.Unstructured
		wantScheduler string
	}{
		"no gang scheduler: no PodGroup, a schedulingPolicy is ignored as in v1": {
			job: mnist(2, policy),
		},
		"volcano, no schedulingPolicy: every pod, their requests from limits": {
			gang: GangVolcano,
			job:  mnist(2),
			want: pg("scheduling.volcano.sh/v1beta1", map[string]any{
				"minMember": int64(3), "minResources": map[string]any{"nvidia.com/gpu": "3"},
			}), // no queue: Volcano's own default queue
			wantScheduler: "volcano",
		},
		"volcano with a schedulingPolicy": {
			gang: GangVolcano,
			job:  mnist(2, policy),
			want: pg("scheduling.volcano.sh/v1beta1", map[string]any{
				"minMember": int64(2), "minResources": map[string]any{"nvidia.com/gpu": "2"},
				"queue": "research", "priorityClassName": "high",
			}),
			wantScheduler: "volcano",
		},
		"scheduler-plugins with a schedulingPolicy; a template's own scheduler is kept": {
			gang: GangSchedulerPlugins,
			job: mnist(2, policy, func(j *kubeflowv1.PyTorchJob) {
				for _, rs := range j.Spec.PyTorchReplicaSpecs {
					rs.Template.Spec.SchedulerName = "my-scheduler"
				}
			}),
			want: pg("scheduling.x-k8s.io/v1alpha1", map[string]any{
				"minMember": int64(2), "minResources": map[string]any{"nvidia.com/gpu": "2"},
				"scheduleTimeoutSeconds": int64(90),
			}),
			wantScheduler: "my-scheduler",
		},
	}
	fw, err := NewFramework()
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := BuildWithGang(fw, Defaulted(tc.job), tc.gang)
			if err != nil {
				t.Fatal(err)
			}
			var got *unstructured.Unstructured
			for _, c := range p.Children {
				if u, ok := c.Object.(*unstructured.Unstructured); ok {
					got = u
					if c.Rule != plan.RuleApplyWhileSuspended {
						t.Errorf("PodGroup rule %s, want %s", c.Rule, plan.RuleApplyWhileSuspended)
					}
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("PodGroup (-want +got):\n%s", diff)
			}
			for _, rj := range p.JobSet().Spec.ReplicatedJobs {
				if s := rj.Template.Spec.Template.Spec.SchedulerName; s != tc.wantScheduler {
					t.Errorf("replicated job %s: schedulerName %q, want %q", rj.Name, s, tc.wantScheduler)
				}
			}
		})
	}
}
