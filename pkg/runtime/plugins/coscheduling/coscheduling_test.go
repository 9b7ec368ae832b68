package coscheduling_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/childsync"
	"github.com/trainyard/trainyard/pkg/observe"
	"github.com/trainyard/trainyard/pkg/plan"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
	"github.com/trainyard/trainyard/pkg/runtime/plugins"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/coscheduling"
	rtt "github.com/trainyard/trainyard/test/util/rtt"
)

func podGroup(spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "scheduling.x-k8s.io/v1alpha1",
		"kind":       "PodGroup",
		"metadata":   map[string]any{"name": "job", "namespace": "ns"},
		"spec":       spec,
	}}
}

// gangRuntime is a torch runtime with a dataset initializer (1 CPU, and an
// init container asking for 3 CPUs: the pod's request is 3) and a trainer
// (2 CPUs, 1Gi), under coscheduling when policy is non-nil.
func gangRuntime(policy *trainer.CoschedulingPodGroupPolicySource) *runtime.Runtime {
	ini := rtt.MakeContainer(trainer.DatasetInitializerContainer, "init:latest")
	ini.Resources = rtt.Requests("cpu", "1")
	w := rtt.MakeTorchRuntime("torch").ReplicatedJobs(
		rtt.MakeReplicatedJob("dataset-initializer", trainer.AncestorDatasetInitializer, ini),
		rtt.MakeReplicatedJob("node", trainer.AncestorTrainer, rtt.MakeContainer(trainer.NodeContainer, "trainer:latest")),
	).TrainerResources(rtt.Requests("cpu", "2", "memory", "1Gi")).PodSpec("dataset-initializer", func(ps *corev1.PodSpec) {
		c := rtt.MakeContainer("fetch", "fetch:latest")
		c.Resources = rtt.Requests("cpu", "3")
		ps.InitContainers = append(ps.InitContainers, c)
	})
	if policy != nil {
		w.Spec.PodGroupPolicy = &trainer.PodGroupPolicy{PodGroupPolicySource: trainer.PodGroupPolicySource{Coscheduling: policy}}
	}
	return w.Obj()
}

func TestBuild(t *testing.T) {
	cases := map[string]struct {
		rt         *runtime.Runtime
		job        *trainer.TrainJob
		want       *unstructured.Unstructured
		wantLabels map[string]map[string]string // pod template labels by replicated job
	}{
		"no podGroupPolicy: no PodGroup, no label": {
			rt:         gangRuntime(nil),
			job:        rtt.MakeTrainJob("ns", "job").NumNodes(3).Obj(),
			wantLabels: map[string]map[string]string{"dataset-initializer": nil, "node": nil},
		},
		"every pod counts, initializers included; init containers raise a pod's request": {
			rt:  gangRuntime(&trainer.CoschedulingPodGroupPolicySource{}),
			job: rtt.MakeTrainJob("ns", "job").NumNodes(3).Obj(),
			want: podGroup(map[string]any{
				"minMember":              int64(4),
				"minResources":           map[string]any{"cpu": "9", "memory": "3Gi"},
				"scheduleTimeoutSeconds": int64(60),
			}),
			wantLabels: map[string]map[string]string{
				"dataset-initializer": {coscheduling.PodGroupLabel: "job"},
				"node":                {coscheduling.PodGroupLabel: "job"},
			},
		},
		"the TrainJob's resourcesPerNode is merged before summing; the runtime's timeout": {
			rt: gangRuntime(&trainer.CoschedulingPodGroupPolicySource{ScheduleTimeoutSeconds: ptr.To[int32](120)}),
			job: rtt.MakeTrainJob("ns", "job").NumNodes(2).
				ResourcesPerNode(rtt.Requests("cpu", "500m", "nvidia.com/gpu", "1")).Obj(),
			want: podGroup(map[string]any{
				"minMember":              int64(3),
				"minResources":           map[string]any{"cpu": "4", "memory": "2Gi", "nvidia.com/gpu": "2"},
				"scheduleTimeoutSeconds": int64(120),
			}),
			wantLabels: map[string]map[string]string{
				"dataset-initializer": {coscheduling.PodGroupLabel: "job"},
				"node":                {coscheduling.PodGroupLabel: "job"},
			},
		},
	}
	fw, err := plugins.NewFramework()
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := fw.Build(runtime.TrainJobRequest(tc.job), tc.rt)
			if err != nil {
				t.Fatal(err)
			}
			var got *unstructured.Unstructured
			for _, c := range p.Children {
				if u, ok := c.Object.(*unstructured.Unstructured); ok && u.GroupVersionKind() == coscheduling.PodGroupGVK {
					got = u
					if c.Rule != plan.RuleApplyWhileSuspended {
						t.Errorf("PodGroup rule = %s, want %s", c.Rule, plan.RuleApplyWhileSuspended)
					}
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("PodGroup (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantLabels, podLabels(p.JobSet(), coscheduling.PodGroupLabel)); diff != "" {
				t.Errorf("pod labels (-want +got):\n%s", diff)
			}
		})
	}
}

// podLabels returns, per replicated job, the pod template's labels of this key.
func podLabels(js *jobsetv1alpha2.JobSet, key string) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, rj := range js.Spec.ReplicatedJobs {
		var m map[string]string
		if v, ok := rj.Template.Spec.Template.Labels[key]; ok {
			m = map[string]string{key: v}
		}
		out[rj.Name] = m
	}
	return out
}

func TestGangWaiting(t *testing.T) {
	job := rtt.MakeTrainJob("ns", "job").Obj()
	withStatus := func(status map[string]any) *unstructured.Unstructured {
		pg := podGroup(map[string]any{"minMember": int64(3)})
		if status != nil {
			pg.Object["status"] = status
		}
		return pg
	}
	unschedulable := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "job-node-0-0"}, Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/2 nodes are available: rejected due to timeout after waiting 60s at permit stage",
	}}}}
	unschedulablePod := func(name, message string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: message,
		}}}}
	}
	boundPod := func(name string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: "node-a"}}
	}
	type want struct {
		Reason, Message string
		Waiting         bool
	}
	cases := map[string]struct {
		pg   *unstructured.Unstructured
		pods []corev1.Pod
		want want
	}{
		"no PodGroup": {},
		"a new PodGroup without status": {
			pg:   withStatus(nil),
			want: want{"PodGroupPending", "PodGroup job is Pending: 0/3 pods scheduled", true},
		},
		"scheduling, with the scheduler's reason on a pod": {
			pg:   withStatus(map[string]any{"phase": "Scheduling", "scheduled": int64(2)}),
			pods: []corev1.Pod{unschedulable},
			want: want{"PodGroupScheduling", "PodGroup job is Scheduling: 2/3 pods scheduled; pod job-node-0-0: 0/2 nodes are available: rejected due to timeout after waiting 60s at permit stage", true},
		},
		"scheduling, with pods bound that the status does not count": {
			pg:   withStatus(map[string]any{"phase": "Scheduling"}),
			pods: []corev1.Pod{boundPod("job-node-0-1"), unschedulable},
			want: want{"PodGroupScheduling", "PodGroup job is Scheduling: 1/3 pods scheduled; pod job-node-0-0: 0/2 nodes are available: rejected due to timeout after waiting 60s at permit stage", true},
		},
		"scheduling, every pod bound: the gang is placed": {
			pg:   withStatus(map[string]any{"phase": "Scheduling"}),
			pods: []corev1.Pod{boundPod("job-node-0-0"), boundPod("job-node-0-1"), boundPod("job-node-0-2")},
		},
		"the pod that does not fit speaks before the siblings released for it": {
			pg: withStatus(map[string]any{"phase": "Scheduling"}),
			pods: []corev1.Pod{
				unschedulablePod("job-node-0-0", "0/2 nodes are available: 1 optimistic rejection in PostFilter."),
				unschedulablePod("job-node-0-1", "0/2 nodes are available: 1 rejection in Unreserve."),
				unschedulablePod("job-node-0-2", "0/2 nodes are available: 2 Insufficient cpu."),
			},
			want: want{"PodGroupScheduling", "PodGroup job is Scheduling: 0/3 pods scheduled; pod job-node-0-2: 0/2 nodes are available: 2 Insufficient cpu.", true},
		},
		"only released siblings: their message": {
			pg:   withStatus(map[string]any{"phase": "Scheduling"}),
			pods: []corev1.Pod{unschedulablePod("job-node-0-0", "0/2 nodes are available: 1 optimistic rejection in PostFilter.")},
			want: want{"PodGroupScheduling", "PodGroup job is Scheduling: 0/3 pods scheduled; pod job-node-0-0: 0/2 nodes are available: 1 optimistic rejection in PostFilter.", true},
		},
		"scheduled: the pods speak for themselves": {
			pg:   withStatus(map[string]any{"phase": "Scheduled", "scheduled": int64(3)}),
			pods: []corev1.Pod{unschedulable},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obs := &observe.Observed{Children: childsync.Children{}, Pods: tc.pods}
			if tc.pg != nil {
				obs.Children[childsync.Key{GroupKind: coscheduling.PodGroupGVK.GroupKind(), Name: "job"}] = tc.pg
			}
			var facts framework.Facts
			coscheduling.New().Status(job.Name, obs, &facts)
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
