package controller

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/childsync"
	"github.com/trainyard/trainyard/pkg/plan"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
	rtt "github.com/trainyard/trainyard/test/util/rtt"
)

// Test-only plugins, registered after Trainyard's own (see TestMain). Each
// acts only on jobs that carry its label, so the other tests of the suite do
// not see them.
const (
	configMapLabel = "test.trainyard.io/configmap"
	podGroupLabel  = "test.trainyard.io/podgroup"
)

// The test plugins implement the extension points they are registered for
// (a plugin that misses one is silently skipped).
var (
	_ framework.BuildPlugin = configMapPlugin{}
	_ framework.OwnerPlugin = configMapPlugin{}
	_ framework.BuildPlugin = podGroupPlugin{}
	_ framework.OwnerPlugin = podGroupPlugin{}
)

// configMapPlugin emits a ConfigMap next to the JobSet with the JobSet's
// labels as data: one more child of the plan, kept by the same syncer.
type configMapPlugin struct{}

func (configMapPlugin) Name() string { return "TestConfigMap" }

func (configMapPlugin) Owns() []client.Object { return []client.Object{&corev1.ConfigMap{}} }

func (configMapPlugin) Build(info *runtime.Info, req *runtime.Request) ([]plan.Child, error) {
	if req.Labels[configMapLabel] == "" {
		return nil, nil
	}
	data := map[string]string{}
	for k, v := range info.Labels {
		data[k] = v
	}
	return []plan.Child{plan.Apply(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: req.Name + "-cfg"},
		Data:       data,
	})}, nil
}

// podGroupGVK is a kind whose CRD the integration environment does not install.
var podGroupGVK = schema.GroupVersionKind{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Kind: "PodGroup"}

func newPodGroup() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(podGroupGVK)
	return u
}

// podGroupPlugin asks for a child whose CRD is not installed.
type podGroupPlugin struct{}

func (podGroupPlugin) Name() string { return "TestPodGroup" }

func (podGroupPlugin) Owns() []client.Object { return []client.Object{newPodGroup()} }

func (podGroupPlugin) Build(_ *runtime.Info, req *runtime.Request) ([]plan.Child, error) {
	if req.Labels[podGroupLabel] == "" {
		return nil, nil
	}
	pg := newPodGroup()
	pg.SetNamespace(req.Namespace)
	pg.SetName(req.Name)
	return []plan.Child{plan.Apply(pg)}, nil
}

var testPlugins = []framework.Plugin{configMapPlugin{}, podGroupPlugin{}}

// A plugin that emits a ConfigMap next to the JobSet: the ConfigMap is
// created, owned by the TrainJob, updated by the same syncer when the
// rendering changes (spec.labels of a suspended job), and garbage-collected
// with the TrainJob.
func TestPlanChildConfigMap(t *testing.T) {
	ns := newNamespace(t)
	applyFile(t, ns, "runtimes/torch-distributed.yaml")
	require.NoError(t, env.Client.Create(ctx(), torchJob(ns, "withcm", func(j *trainer.TrainJob) {
		j.Labels = map[string]string{configMapLabel: "yes"}
		j.Spec.Suspend = ptr.To(true)
		j.Spec.Labels = map[string]string{"team": "a"}
	})))
	job := waitCreated(t, ns, "withcm")
	key := client.ObjectKey{Namespace: ns, Name: "withcm-cfg"}
	var cm corev1.ConfigMap
	eventually(t, func() error { return env.Client.Get(ctx(), key, &cm) })
	require.Equal(t, "a", cm.Data["team"])
	require.True(t, metav1.IsControlledBy(&cm, job), "the ConfigMap is controlled by the TrainJob: %+v", cm.OwnerReferences)
	require.Equal(t, childsync.ManagedBy, cm.Labels[childsync.ManagedByLabel])
	rv := cm.ResourceVersion

	// An unchanged rendering is not written again.
	patchTrainJob(t, ns, "withcm", func(j *trainer.TrainJob) { j.Annotations = map[string]string{"touch": "1"} })
	consistently(t, 2e9, func() error {
		var now corev1.ConfigMap
		if err := env.Client.Get(ctx(), key, &now); err != nil {
			return err
		}
		if now.ResourceVersion != rv {
			return fmt.Errorf("ConfigMap rewritten without a change: %s -> %s", rv, now.ResourceVersion)
		}
		return nil
	})

	// A changed rendering is applied.
	patchTrainJob(t, ns, "withcm", func(j *trainer.TrainJob) { j.Spec.Labels["team"] = "b" })
	eventually(t, func() error {
		if err := env.Client.Get(ctx(), key, &cm); err != nil {
			return err
		}
		if cm.Data["team"] != "b" {
			return fmt.Errorf("ConfigMap data %v, want team=b", cm.Data)
		}
		return nil
	})

	// Deleting the TrainJob takes the ConfigMap with it (the real garbage collector).
	require.NoError(t, env.Client.Delete(ctx(), job))
	eventually(t, func() error {
		if err := env.Client.Get(ctx(), key, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("ConfigMap still there (err=%v)", err)
		}
		return nil
	})
}

// A plan child whose CRD is not installed is a clear status error naming the
// kind, and the job does not run without it: nothing of the plan is written.
func TestPlanChildKindNotServed(t *testing.T) {
	ns := newNamespace(t)
	applyFile(t, ns, "runtimes/torch-distributed.yaml")
	require.NoError(t, env.Client.Create(ctx(), torchJob(ns, "nogang", func(j *trainer.TrainJob) {
		j.Labels = map[string]string{podGroupLabel: "yes"}
	})))
	job := waitCondition(t, ns, "nogang", trainer.TrainJobCreated, metav1.ConditionFalse, trainer.TrainJobChildKindNotServedReason)
	msg := findCond(job, trainer.TrainJobCreated).Message
	require.Contains(t, msg, "PodGroup.scheduling.x-k8s.io")
	require.Contains(t, msg, "install its CRD")
	consistently(t, 2e9, func() error {
		if err := env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "nogang"}, &jobsetv1alpha2.JobSet{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the job got a JobSet without its PodGroup (err=%v)", err)
		}
		return nil
	})
}

// A runtime that asks for a coscheduling or Volcano gang on a cluster without
// that PodGroup CRD: the TrainJob says which CRD is missing and never runs
// without its gang.
func TestGangPodGroupKindNotServed(t *testing.T) {
	cases := map[string]struct {
		policy trainer.PodGroupPolicySource
		kind   string
	}{
		"coscheduling": {trainer.PodGroupPolicySource{Coscheduling: &trainer.CoschedulingPodGroupPolicySource{}}, "PodGroup.scheduling.x-k8s.io"},
		"volcano":      {trainer.PodGroupPolicySource{Volcano: &trainer.VolcanoPodGroupPolicySource{}}, "PodGroup.scheduling.volcano.sh"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ns := newNamespace(t)
			rt := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gang"}, Spec: trainer.TrainingRuntimeSpec{
				MLPolicy:       &trainer.MLPolicy{NumNodes: ptr.To[int32](1)},
				PodGroupPolicy: &trainer.PodGroupPolicy{PodGroupPolicySource: tc.policy},
				Template: trainer.JobSetTemplateSpec{Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{
					rtt.MakeReplicatedJob("node", trainer.AncestorTrainer, rtt.MakeContainer(trainer.NodeContainer, "trainer:latest")),
				}}},
			}}
			require.NoError(t, env.Client.Create(ctx(), rt))
			require.NoError(t, env.Client.Create(ctx(), &trainer.TrainJob{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gang"},
				Spec:       trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "gang", Kind: ptr.To(trainer.TrainingRuntimeKind), APIGroup: ptr.To(trainer.GroupVersion.Group)}},
			}))
			job := waitCondition(t, ns, "gang", trainer.TrainJobCreated, metav1.ConditionFalse, trainer.TrainJobChildKindNotServedReason)
			msg := findCond(job, trainer.TrainJobCreated).Message
			require.Contains(t, msg, tc.kind)
			require.Contains(t, msg, "install its CRD")
			consistently(t, 2e9, func() error {
				if err := env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "gang"}, &jobsetv1alpha2.JobSet{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("the job got a JobSet without its PodGroup (err=%v)", err)
				}
				return nil
			})
		})
	}
}
