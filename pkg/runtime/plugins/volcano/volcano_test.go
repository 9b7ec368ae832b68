package volcano_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/childsync"
	"github.com/trainyard/trainyard/pkg/observe"
	"github.com/trainyard/trainyard/pkg/plan"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
	"github.com/trainyard/trainyard/pkg/runtime/plugins"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/volcano"
	rtt "github.com/trainyard/trainyard/test/util/rtt"
)

func podGroup(spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "scheduling.volcano.sh/v1beta1",
		"kind":       "PodGroup",
		"metadata":   map[string]any{"name": "job", "namespace": "ns"},
		"spec":       spec,
	}}
}

// gangRuntime is a torch runtime with a launcher-like job without an ancestor
// label (2 replicas of 1 CPU) and a trainer (2 CPUs), under Volcano when
// policy is non-nil, with the JobSet template annotations given.
func gangRuntime(policy *trainer.VolcanoPodGroupPolicySource, annotations map[string]string, priority map[string]string) *runtime.Runtime {
	side := rtt.MakeContainer("side", "side:latest")
	side.Resources = rtt.Requests("cpu", "1")
	sideJob := rtt.MakeReplicatedJob("side", "", side)
	sideJob.Replicas = 2
	return rtt.MakeTorchRuntime("torch").ReplicatedJobs(
		sideJob,
		rtt.MakeReplicatedJob("node", trainer.AncestorTrainer, rtt.MakeContainer(trainer.NodeContainer, "trainer:latest")),
	).TrainerResources(rtt.Requests("cpu", "2")).Annotations(annotations).PriorityClasses(priority).Volcano(policy).Obj()
}

func TestBuild(t *testing.T) {
	cases := map[string]struct {
		rt              *runtime.Runtime
		want            *unstructured.Unstructured
		wantAnnotations map[string]string // pod template group-name annotation by replicated job
	}{
		"no podGroupPolicy: no PodGroup, no annotation": {
			rt:              gangRuntime(nil, map[string]string{volcano.QueueAnnotation: "q"}, nil),
			wantAnnotations: map[string]string{"side": "", "node": ""},
		},
		"bare policy: all pods, summed requests, no queue": {
			rt: gangRuntime(&trainer.VolcanoPodGroupPolicySource{}, nil, nil),
			want: podGroup(map[string]any{
				"minMember":    int64(6),
				"minResources": map[string]any{"cpu": "10"},
			}),
			wantAnnotations: map[string]string{"side": "job", "node": "job"},
		},
		"queue from the JobSet annotation, the last job's priority class, network topology": {
			rt: gangRuntime(&trainer.VolcanoPodGroupPolicySource{NetworkTopology: &trainer.NetworkTopologySpec{Mode: "hard", HighestTierAllowed: ptr.To(2)}},
				map[string]string{volcano.QueueAnnotation: "research"}, map[string]string{"side": "low", "node": "high"}),
			want: podGroup(map[string]any{
				"minMember":         int64(6),
				"minResources":      map[string]any{"cpu": "10"},
				"queue":             "research",
				"priorityClassName": "high",
				"networkTopology":   map[string]any{"mode": "hard", "highestTierAllowed": int64(2)},
			}),
			wantAnnotations: map[string]string{"side": "job", "node": "job"},
		},
	}
	fw, err := plugins.NewFramework()
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := fw.Build(runtime.TrainJobRequest(rtt.MakeTrainJob("ns", "job").NumNodes(4).Obj()), tc.rt)
			if err != nil {
				t.Fatal(err)
			}
			var got *unstructured.Unstructured
			for _, c := range p.Children {
				if u, ok := c.Object.(*unstructured.Unstructured); ok && u.GroupVersionKind() == volcano.PodGroupGVK {
					got = u
					if c.Rule != plan.RuleApplyWhileSuspended {
						t.Errorf("PodGroup rule = %s, want %s", c.Rule, plan.RuleApplyWhileSuspended)
					}
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("PodGroup (-want +got):\n%s", diff)
			}
			ann := map[string]string{}
			for _, rj := range p.JobSet().Spec.ReplicatedJobs {
				ann[rj.Name] = rj.Template.Spec.Template.Annotations[volcano.GroupNameAnnotation]
			}
			if diff := cmp.Diff(tc.wantAnnotations, ann); diff != "" {
				t.Errorf("pod annotations (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	cases := map[string]struct {
		rt   *runtime.Runtime
		want []rtt.FieldErrDetail
	}{
		"a queue":             {rt: gangRuntime(&trainer.VolcanoPodGroupPolicySource{}, map[string]string{volcano.QueueAnnotation: "q"}, nil)},
		"no queue annotation": {rt: gangRuntime(&trainer.VolcanoPodGroupPolicySource{}, nil, nil)},
		"an empty queue name": {
			rt:   gangRuntime(&trainer.VolcanoPodGroupPolicySource{}, map[string]string{volcano.QueueAnnotation: ""}, nil),
			want: []rtt.FieldErrDetail{{Field: "spec.annotations[scheduling.volcano.sh/queue-name]", Type: field.ErrorTypeInvalid, Detail: "Volcano queue name must not be empty"}},
		},
		"an empty queue name without a Volcano policy is not Volcano's": {
			rt: gangRuntime(nil, map[string]string{volcano.QueueAnnotation: ""}, nil),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := rtt.MakeTrainJob("ns", "job").Obj()
			info, err := runtime.NewInfo(runtime.TrainJobRequest(job), tc.rt)
			if err != nil {
				t.Fatal(err)
			}
			got := rtt.FieldErrDetails(volcano.New().Validate(info, runtime.TrainJobRequest(job)))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

var _ framework.ValidatePlugin = volcano.New()

func TestGangWaiting(t *testing.T) {
	job := rtt.MakeTrainJob("ns", "job").Obj()
	withStatus := func(status map[string]any) *unstructured.Unstructured {
		pg := podGroup(map[string]any{"minMember": int64(3), "queue": "research"})
		if status != nil {
			pg.Object["status"] = status
		}
		return pg
	}
	type want struct {
		Reason, Message string
		Waiting         bool
	}
	cases := map[string]struct {
		pg   *unstructured.Unstructured
		want want
	}{
		"no PodGroup": {},
		"inqueue, no condition": {
			pg:   withStatus(map[string]any{"phase": "Inqueue"}),
			want: want{"PodGroupInqueue", "PodGroup job is Inqueue in queue research", true},
		},
		"unschedulable: Volcano's reason and message": {
			pg: withStatus(map[string]any{"phase": "Pending", "conditions": []any{
				map[string]any{"type": "Scheduled", "status": "False"},
				map[string]any{"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources", "message": "3/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable"},
			}}),
			want: want{"NotEnoughResources", "PodGroup job: 3/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable", true},
		},
		"running": {
			pg: withStatus(map[string]any{"phase": "Running", "conditions": []any{
				map[string]any{"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources"},
			}}),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obs := &observe.Observed{Children: childsync.Children{}}
			if tc.pg != nil {
				obs.Children[childsync.Key{GroupKind: volcano.PodGroupGVK.GroupKind(), Name: "job"}] = tc.pg
			}
			var facts framework.Facts
			volcano.New().Status(job.Name, obs, &facts)
			var got want
			if facts.Gang != nil {
				got = want{facts.Gang.Reason, facts.Gang.Message, true}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("gang facts (-want +got):\n%s", diff)
			}
		})
	}
}
