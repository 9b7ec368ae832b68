package runtime_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
	"github.com/trainyard/trainyard/pkg/runtime/plugins"
	rtt "github.com/trainyard/trainyard/test/util/rtt"
)

// ---------------------------------------------------------------------------
// NormalizePatches

// normalized is a Patch with its path as a string, for cmp.
type normalized struct {
	Path  string
	Patch trainer.RuntimePatch
}

func normalize(job *trainer.TrainJob) []normalized {
	var out []normalized
	for _, p := range runtime.NormalizePatches(job) {
		out = append(out, normalized{Path: p.Path.String(), Patch: p.Patch})
	}
	return out
}

func legacyMeta(labels, annotations map[string]string) trainer.RuntimePatch {
	return trainer.RuntimePatch{Manager: runtime.LegacyManager, TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{
		Template: &trainer.JobSetTemplatePatch{Metadata: &metav1.ObjectMeta{Labels: labels, Annotations: annotations}},
	}}
}

func legacyPods(pt *trainer.PodTemplatePatch, jobs ...string) trainer.RuntimePatch {
	var rjs []trainer.ReplicatedJobPatch
	for _, j := range jobs {
		rjs = append(rjs, trainer.ReplicatedJobPatch{Name: j, Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{Template: pt}}})
	}
	return trainer.RuntimePatch{Manager: runtime.LegacyManager, TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{
		Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: rjs}},
	}}
}

func userPatch(manager string, labels map[string]string) trainer.RuntimePatch {
	return trainer.RuntimePatch{Manager: manager, TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{
		Template: &trainer.JobSetTemplatePatch{Metadata: &metav1.ObjectMeta{Labels: labels}},
	}}
}

func TestNormalizePatches(t *testing.T) {
	cases := map[string]struct {
		job  *trainer.TrainJob
		want []normalized
	}{
		"no overrides": {
			job: rtt.MakeTrainJob("ns", "job").NumNodes(2).Obj(),
		},
		"only annotations": {
			job:  rtt.MakeTrainJob("ns", "job").Annotations(map[string]string{"a": "1"}).Obj(),
			want: []normalized{{Path: "spec", Patch: legacyMeta(nil, map[string]string{"a": "1"})}},
		},
		"v2.1 labels and annotations become one patch": {
			job:  rtt.MakeTrainJob("ns", "job").Labels(map[string]string{"l": "1"}).Annotations(map[string]string{"a": "1"}).Obj(),
			want: []normalized{{Path: "spec", Patch: legacyMeta(map[string]string{"l": "1"}, map[string]string{"a": "1"})}},
		},
		"an override becomes one patch over all its target jobs": {
			job: rtt.MakeTrainJob("ns", "job").PodTemplateOverride(trainer.PodTemplateOverride{
				TargetJobs: []trainer.PodTemplateOverrideTargetJob{{Name: "node"}, {Name: "init"}},
				Metadata:   &metav1.ObjectMeta{Labels: map[string]string{"p": "1"}, Annotations: map[string]string{"q": "2"}, Name: "ignored"},
				Spec: &trainer.PodTemplateSpecOverride{
					ServiceAccountName: ptr.To("sa"),
					NodeSelector:       map[string]string{"n": "1"},
					Tolerations:        []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}},
					Volumes:            []corev1.Volume{{Name: "v"}},
					InitContainers:     []trainer.ContainerOverride{{Name: "i", Env: []corev1.EnvVar{env("I", "1")}}},
					Containers: []trainer.ContainerOverride{{Name: "c", Env: []corev1.EnvVar{env("C", "1")},
						VolumeMounts: []corev1.VolumeMount{{Name: "v", MountPath: "/v"}}}},
					SchedulingGates:  []corev1.PodSchedulingGate{{Name: "g"}},
					ImagePullSecrets: []corev1.LocalObjectReference{{Name: "r"}},
				},
			}).Obj(),
			want: []normalized{{Path: "spec.podTemplateOverrides[0]", Patch: legacyPods(&trainer.PodTemplatePatch{
				Metadata: &metav1.ObjectMeta{Labels: map[string]string{"p": "1"}, Annotations: map[string]string{"q": "2"}},
				Spec: &trainer.PodSpecPatch{
					ServiceAccountName: ptr.To("sa"),
					NodeSelector:       map[string]string{"n": "1"},
					Tolerations:        []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}},
					Volumes:            []corev1.Volume{{Name: "v"}},
					InitContainers:     []trainer.ContainerPatch{{Name: "i", Env: []corev1.EnvVar{env("I", "1")}}},
					Containers: []trainer.ContainerPatch{{Name: "c", Env: []corev1.EnvVar{env("C", "1")},
						VolumeMounts: []corev1.VolumeMount{{Name: "v", MountPath: "/v"}}}},
					SchedulingGates:  []corev1.PodSchedulingGate{{Name: "g"}},
					ImagePullSecrets: []corev1.LocalObjectReference{{Name: "r"}},
				},
			}, "node", "init")}},
		},
		"order: v2.1 metadata, then overrides, then runtimePatches, each in list order": {
			job: rtt.MakeTrainJob("ns", "job").
				RuntimePatch(userPatch("b.example.com/one", map[string]string{"x": "1"})).
				PodTemplateOverride(trainer.PodTemplateOverride{TargetJobs: []trainer.PodTemplateOverrideTargetJob{{Name: "first"}}}).
				RuntimePatch(userPatch("a.example.com/two", map[string]string{"x": "2"})).
				PodTemplateOverride(trainer.PodTemplateOverride{TargetJobs: []trainer.PodTemplateOverrideTargetJob{{Name: "second"}}}).
				Labels(map[string]string{"l": "1"}).Obj(),
			want: []normalized{
				{Path: "spec", Patch: legacyMeta(map[string]string{"l": "1"}, nil)},
				{Path: "spec.podTemplateOverrides[0]", Patch: legacyPods(&trainer.PodTemplatePatch{}, "first")},
				{Path: "spec.podTemplateOverrides[1]", Patch: legacyPods(&trainer.PodTemplatePatch{}, "second")},
				{Path: "spec.runtimePatches[0]", Patch: userPatch("b.example.com/one", map[string]string{"x": "1"})},
				{Path: "spec.runtimePatches[1]", Patch: userPatch("a.example.com/two", map[string]string{"x": "2"})},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := tc.job.DeepCopy()
			if diff := cmp.Diff(tc.want, normalize(tc.job)); diff != "" {
				t.Errorf("NormalizePatches (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tc.job); diff != "" {
				t.Errorf("NormalizePatches changed the TrainJob (-before +after):\n%s", diff)
			}
		})
	}
}

// Later patches win: v2.3 runtimePatches over v2.1 overrides over v2.1 metadata,
// and later list entries over earlier ones.
func TestPatchPrecedence(t *testing.T) {
	rt := rtt.MakeTorchRuntime("torch").Labels(map[string]string{"team": "runtime"}).
		ContainerEnv("node", "node", env("LEVEL", "runtime")).Obj()
	envPatch := func(manager, value string) trainer.RuntimePatch {
		return trainer.RuntimePatch{Manager: manager, TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{
			Metadata: &metav1.ObjectMeta{Labels: map[string]string{"team": value}},
			Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{Name: "node", Template: &trainer.JobTemplatePatch{
				Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{Spec: &trainer.PodSpecPatch{
					Containers: []trainer.ContainerPatch{{Name: "node", Env: []corev1.EnvVar{env("LEVEL", value)}}},
				}}},
			}}}},
		}}}
	}
	override := func(value string) trainer.PodTemplateOverride {
		return trainer.PodTemplateOverride{
			TargetJobs: []trainer.PodTemplateOverrideTargetJob{{Name: "node"}},
			Spec:       &trainer.PodTemplateSpecOverride{Containers: []trainer.ContainerOverride{{Name: "node", Env: []corev1.EnvVar{env("LEVEL", value)}}}},
		}
	}
	cases := map[string]struct {
		job                 *trainer.TrainJob
		wantTeam, wantLevel string
	}{
		"runtime values": {
			job: rtt.MakeTrainJob("ns", "job").Obj(), wantTeam: "runtime", wantLevel: "runtime",
		},
		"v2.1": {
			job:      rtt.MakeTrainJob("ns", "job").Labels(map[string]string{"team": "v21"}).PodTemplateOverride(override("v21")).Obj(),
			wantTeam: "v21", wantLevel: "v21",
		},
		"the second override wins over the first": {
			job:      rtt.MakeTrainJob("ns", "job").PodTemplateOverride(override("first")).PodTemplateOverride(override("second")).Obj(),
			wantTeam: "runtime", wantLevel: "second",
		},
		"v2.3 wins over v2.1": {
			job: rtt.MakeTrainJob("ns", "job").RuntimePatch(envPatch("example.com/user", "v23")).
				Labels(map[string]string{"team": "v21"}).PodTemplateOverride(override("v21")).Obj(),
			wantTeam: "v23", wantLevel: "v23",
		},
		"the last runtimePatch wins": {
			job:      rtt.MakeTrainJob("ns", "job").RuntimePatch(envPatch("example.com/a", "a")).RuntimePatch(envPatch("example.com/b", "b")).Obj(),
			wantTeam: "b", wantLevel: "b",
		},
		"the trainer's env wins over every patch": {
			job: rtt.MakeTrainJob("ns", "job").RuntimePatch(envPatch("example.com/a", "a")).
				Env(env("LEVEL", "trainer")).Obj(),
			wantTeam: "a", wantLevel: "trainer",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			info, err := runtime.NewInfo(runtime.TrainJobRequest(tc.job), rt)
			if err != nil {
				t.Fatalf("NewInfo: %v", err)
			}
			if got := info.Labels["team"]; got != tc.wantTeam {
				t.Errorf("label team = %q, want %q", got, tc.wantTeam)
			}
			want := []corev1.EnvVar{env("LEVEL", tc.wantLevel)}
			if diff := cmp.Diff(want, info.TrainerContainer().Env); diff != "" {
				t.Errorf("node env (-want +got):\n%s", diff)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// ApplyPatch

func podPatch(rjob string, pt trainer.PodTemplatePatch) runtime.Patch {
	return runtime.Patch{Path: field.NewPath("spec", "runtimePatches").Index(0), Patch: trainer.RuntimePatch{
		Manager: "example.com/test",
		TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{
			ReplicatedJobs: []trainer.ReplicatedJobPatch{{Name: rjob, Template: &trainer.JobTemplatePatch{
				Spec: &trainer.JobSpecPatch{Template: &pt},
			}}},
		}}},
	}}
}

// patchRuntime is the runtime the ApplyPatch cases start from.
func patchRuntime() *runtime.Runtime {
	return rtt.MakeTorchRuntime("torch").
		Labels(map[string]string{"a": "1", "b": "1"}).
		Container("node", corev1.Container{Name: "sidecar", Image: "s:1",
			Env:          []corev1.EnvVar{env("A", "1"), env("B", "1")},
			VolumeMounts: []corev1.VolumeMount{{Name: "cache", MountPath: "/cache"}},
		}).
		PodSpec("node", func(ps *corev1.PodSpec) {
			ps.InitContainers = []corev1.Container{{Name: "setup", Image: "setup:1"}}
			ps.NodeSelector = map[string]string{"pool": "train", "zone": "a"}
			ps.Tolerations = []corev1.Toleration{{Key: "runtime", Operator: corev1.TolerationOpExists}}
			ps.Volumes = []corev1.Volume{{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			ps.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "runtime-cred"}}
			ps.SchedulingGates = []corev1.PodSchedulingGate{{Name: "runtime-gate"}}
			ps.ServiceAccountName = "runtime-sa"
		}).
		ReplicatedJob(rtt.MakeReplicatedJob("dataset-initializer", trainer.AncestorDatasetInitializer, rtt.MakeContainer("dataset-initializer", "ds:1"))).
		Obj()
}

// unorderedLists compares the lists whose order carries no meaning for the pod
// (volumes, volume mounts, pull secrets, scheduling gates) as sets. Env and
// containers stay ordered: env order decides $(VAR) expansion, and the first
// container is the pod's default container.
var unorderedLists = cmp.Options{
	cmpopts.SortSlices(func(a, b corev1.Volume) bool { return a.Name < b.Name }),
	cmpopts.SortSlices(func(a, b corev1.VolumeMount) bool { return a.MountPath < b.MountPath }),
	cmpopts.SortSlices(func(a, b corev1.LocalObjectReference) bool { return a.Name < b.Name }),
	cmpopts.SortSlices(func(a, b corev1.PodSchedulingGate) bool { return a.Name < b.Name }),
}

type applyPatchCase struct {
	patch runtime.Patch
	// edit turns the pod spec of the "node" job of patchRuntime into the expected one.
	edit       func(ps *corev1.PodSpec)
	wantLabels map[string]string
	wantJobMD  *metav1.ObjectMeta
	wantPodMD  *metav1.ObjectMeta
}

func TestApplyPatch(t *testing.T) {
	runApplyPatchCases(t, map[string]applyPatchCase{
		"no trainingRuntimeSpec is a no-op": {
			patch: runtime.Patch{Path: field.NewPath("spec", "runtimePatches").Index(0), Patch: trainer.RuntimePatch{Manager: "m"}},
		},
		"no template is a no-op": {
			patch: runtime.Patch{Path: field.NewPath("spec", "runtimePatches").Index(0), Patch: trainer.RuntimePatch{Manager: "m",
				TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{}}},
		},
		"JobSet labels merge": {
			patch:      runtime.Patch{Path: field.NewPath("spec", "runtimePatches").Index(0), Patch: userPatch("m", map[string]string{"b": "2", "c": "3"})},
			wantLabels: map[string]string{"a": "1", "b": "2", "c": "3"},
		},
		"Job template metadata merges": {
			patch: runtime.Patch{Path: field.NewPath("spec", "runtimePatches").Index(0), Patch: trainer.RuntimePatch{Manager: "m",
				TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{
					ReplicatedJobs: []trainer.ReplicatedJobPatch{{Name: "node", Template: &trainer.JobTemplatePatch{
						Metadata: &metav1.ObjectMeta{Labels: map[string]string{"job": "x"}, Annotations: map[string]string{"ja": "y"}},
					}}},
				}}}}},
			wantJobMD: &metav1.ObjectMeta{Labels: map[string]string{trainer.AncestorLabel: "trainer", "job": "x"}, Annotations: map[string]string{"ja": "y"}},
		},
		"pod metadata merges": {
			patch: podPatch("node", trainer.PodTemplatePatch{Metadata: &metav1.ObjectMeta{
				Labels: map[string]string{"pod": "x"}, Annotations: map[string]string{"pa": "y"}}}),
			wantPodMD: &metav1.ObjectMeta{Labels: map[string]string{"pod": "x"}, Annotations: map[string]string{"pa": "y"}},
		},
		"nodeSelector merges as a map": {
			patch: podPatch("node", trainer.PodTemplatePatch{Spec: &trainer.PodSpecPatch{NodeSelector: map[string]string{"zone": "b", "gpu": "a100"}}}),
			edit: func(ps *corev1.PodSpec) {
				ps.NodeSelector = map[string]string{"pool": "train", "zone": "b", "gpu": "a100"}
			},
		},
		"tolerations are a union: the runtime's stay, duplicates are not added": {
			patch: podPatch("node", trainer.PodTemplatePatch{Spec: &trainer.PodSpecPatch{
				Tolerations: []corev1.Toleration{
					{Key: "runtime", Operator: corev1.TolerationOpExists},
					{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}}),
			edit: func(ps *corev1.PodSpec) {
				ps.Tolerations = []corev1.Toleration{{Key: "runtime", Operator: corev1.TolerationOpExists},
					{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
			},
		},
		"container env merges by name, volumeMounts by mountPath": {
			patch: podPatch("node", trainer.PodTemplatePatch{Spec: &trainer.PodSpecPatch{Containers: []trainer.ContainerPatch{{
				Name:         "sidecar",
				Env:          []corev1.EnvVar{env("B", "2"), env("C", "3")},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data", ReadOnly: true}, {Name: "cache2", MountPath: "/cache"}},
			}}}}),
			edit: func(ps *corev1.PodSpec) {
				ps.Containers[1].Env = []corev1.EnvVar{env("A", "1"), env("B", "2"), env("C", "3")}
				ps.Containers[1].VolumeMounts = []corev1.VolumeMount{{Name: "cache2", MountPath: "/cache"}, {Name: "data", MountPath: "/data", ReadOnly: true}}
			},
		},
		"init containers are patched": {
			patch: podPatch("node", trainer.PodTemplatePatch{Spec: &trainer.PodSpecPatch{InitContainers: []trainer.ContainerPatch{{
				Name: "setup", Env: []corev1.EnvVar{env("S", "1")}, SecurityContext: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true)},
			}}}}),
			edit: func(ps *corev1.PodSpec) {
				ps.InitContainers[0].Env = []corev1.EnvVar{env("S", "1")}
				ps.InitContainers[0].SecurityContext = &corev1.SecurityContext{RunAsNonRoot: ptr.To(true)}
			},
		},
		"scalar fields replace, gates and pull secrets merge by name": {
			patch: podPatch("node", trainer.PodTemplatePatch{Spec: &trainer.PodSpecPatch{
				ServiceAccountName:            ptr.To("user-sa"),
				SchedulingGates:               []corev1.PodSchedulingGate{{Name: "kueue.x-k8s.io/admission"}},
				ImagePullSecrets:              []corev1.LocalObjectReference{{Name: "user-cred"}, {Name: "runtime-cred"}},
				SecurityContext:               &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000)},
				TerminationGracePeriodSeconds: ptr.To[int64](5),
				Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "k", Operator: corev1.NodeSelectorOpIn, Values: []string{"v"}}}}},
				}}},
			}}),
			edit: func(ps *corev1.PodSpec) {
				ps.ServiceAccountName = "user-sa"
				ps.SchedulingGates = []corev1.PodSchedulingGate{{Name: "runtime-gate"}, {Name: "kueue.x-k8s.io/admission"}}
				ps.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "runtime-cred"}, {Name: "user-cred"}}
				ps.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000)}
				ps.TerminationGracePeriodSeconds = ptr.To[int64](5)
				ps.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "k", Operator: corev1.NodeSelectorOpIn, Values: []string{"v"}}}}},
				}}}
			},
		},
		"a job template patch without a pod template only merges metadata": {
			patch: runtime.Patch{Path: field.NewPath("spec", "runtimePatches").Index(0), Patch: trainer.RuntimePatch{Manager: "m",
				TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{
					ReplicatedJobs: []trainer.ReplicatedJobPatch{{Name: "node"}, {Name: "node", Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{}}}},
				}}}}},
		},
	})
}

// Entries of merge-keyed lists (env, volumes) that a patch names are replaced,
// not merged field by field: the runtime's and the patch's versions of one entry
// can be exclusive (value and valueFrom; two volume sources), and their union is
// an object the API server rejects.
func TestApplyPatchReplacesListEntries(t *testing.T) {
	runApplyPatchCases(t, map[string]applyPatchCase{
		"an env var patched from a value to a secret reference holds only the reference": {
			patch: podPatch("node", trainer.PodTemplatePatch{Spec: &trainer.PodSpecPatch{Containers: []trainer.ContainerPatch{{
				Name: "sidecar",
				Env: []corev1.EnvVar{{Name: "B", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "token"}, Key: "t"}}}},
			}}}}),
			edit: func(ps *corev1.PodSpec) {
				// A value and a valueFrom together are rejected by the API server
				// ("may not be specified when `value` is not empty").
				ps.Containers[1].Env = []corev1.EnvVar{env("A", "1"), {Name: "B", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "token"}, Key: "t"}}}}
			},
		},
		"a same-named volume of another type replaces the runtime's": {
			patch: podPatch("node", trainer.PodTemplatePatch{Spec: &trainer.PodSpecPatch{Volumes: []corev1.Volume{
				{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "ds"}}},
				{Name: "cache", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/mnt/cache"}}},
			}}}),
			edit: func(ps *corev1.PodSpec) {
				ps.Volumes = []corev1.Volume{
					{Name: "cache", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/mnt/cache"}}},
					{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "ds"}}},
				}
			},
		},
	})
}

// A patch keeps the runtime's order of containers and env, and appends what it
// adds: env order decides $(VAR) expansion, and the first container is the
// pod's default one (kubectl logs/exec).
func TestApplyPatchKeepsRuntimeOrder(t *testing.T) {
	runApplyPatchCases(t, map[string]applyPatchCase{
		"a new env var from a patch comes after the runtime's, so that it can refer to them": {
			patch: podPatch("node", trainer.PodTemplatePatch{Spec: &trainer.PodSpecPatch{Containers: []trainer.ContainerPatch{{
				Name: "sidecar",
				Env:  []corev1.EnvVar{env("C", "$(A)/c")},
			}}}}),
			edit: func(ps *corev1.PodSpec) {
				// Kubernetes expands $(A) only when A is defined earlier in the list.
				ps.Containers[1].Env = []corev1.EnvVar{env("A", "1"), env("B", "1"), env("C", "$(A)/c")}
			},
		},
		"patching containers keeps the runtime's container order": {
			patch: podPatch("node", trainer.PodTemplatePatch{Spec: &trainer.PodSpecPatch{Containers: []trainer.ContainerPatch{
				{Name: "sidecar", Env: []corev1.EnvVar{env("A", "2")}},
				{Name: "node", Env: []corev1.EnvVar{env("N", "1")}},
			}}}),
			edit: func(ps *corev1.PodSpec) {
				// "node" stays the first, default, container of the pod.
				ps.Containers[0].Env = []corev1.EnvVar{env("N", "1")}
				ps.Containers[1].Env = []corev1.EnvVar{env("A", "2"), env("B", "1")}
			},
		},
	})
}

// volumes merge by name (the order of the result carries no meaning)
func TestApplyPatchAddsVolumes(t *testing.T) {
	runApplyPatchCases(t, map[string]applyPatchCase{
		"new volumes are added, existing ones kept": {
			patch: podPatch("node", trainer.PodTemplatePatch{Spec: &trainer.PodSpecPatch{Volumes: []corev1.Volume{
				{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "ds"}}},
			}}}),
			edit: func(ps *corev1.PodSpec) {
				ps.Volumes = append(ps.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "ds"}}})
			},
		},
		"a same-named volume of the same type is merged": {
			patch: podPatch("node", trainer.PodTemplatePatch{Spec: &trainer.PodSpecPatch{Volumes: []corev1.Volume{
				{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
			}}}),
			edit: func(ps *corev1.PodSpec) {
				ps.Volumes = []corev1.Volume{{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}}}
			},
		},
	})
}

func runApplyPatchCases(t *testing.T, cases map[string]applyPatchCase) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rt := patchRuntime()
			info, err := runtime.NewInfo(runtime.TrainJobRequest(rtt.MakeTrainJob("ns", "job").Obj()), rt)
			if err != nil {
				t.Fatal(err)
			}
			wantSpec := *info.Spec.DeepCopy()
			if tc.edit != nil {
				tc.edit(&wantSpec.ReplicatedJobs[0].Template.Spec.Template.Spec)
			}
			if tc.wantJobMD != nil {
				wantSpec.ReplicatedJobs[0].Template.ObjectMeta = *tc.wantJobMD
			}
			if tc.wantPodMD != nil {
				wantSpec.ReplicatedJobs[0].Template.Spec.Template.ObjectMeta = *tc.wantPodMD
			}
			wantLabels := tc.wantLabels
			if wantLabels == nil {
				wantLabels = map[string]string{"a": "1", "b": "1"}
			}
			patchBefore := tc.patch.Patch.DeepCopy()

			if err := info.ApplyPatch(tc.patch); err != nil {
				t.Fatalf("ApplyPatch: %v", err)
			}
			if diff := cmp.Diff(wantSpec, info.Spec, unorderedLists); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantLabels, info.Labels); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(patchBefore, &tc.patch.Patch); diff != "" {
				t.Errorf("ApplyPatch changed the patch (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(patchRuntime(), rt); diff != "" {
				t.Errorf("ApplyPatch changed the runtime (-before +after):\n%s", diff)
			}
		})
	}
}

// A patch that names a replicated job or container the runtime does not have is
// an error at the TrainJob field that names it (a strategic merge would silently
// add an empty container).
func TestApplyPatchNotFound(t *testing.T) {
	containers := func(names ...string) *trainer.PodSpecPatch {
		ps := &trainer.PodSpecPatch{}
		for _, n := range names {
			ps.Containers = append(ps.Containers, trainer.ContainerPatch{Name: n, Env: []corev1.EnvVar{env("X", "1")}})
		}
		return ps
	}
	rjobPatch := func(name string, ps *trainer.PodSpecPatch) trainer.ReplicatedJobPatch {
		return trainer.ReplicatedJobPatch{Name: name, Template: &trainer.JobTemplatePatch{
			Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{Spec: ps}}}}
	}
	v23 := func(manager string, rjs ...trainer.ReplicatedJobPatch) trainer.RuntimePatch {
		return trainer.RuntimePatch{Manager: manager, TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{
			Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: rjs}}}}
	}
	targets := func(names ...string) []trainer.PodTemplateOverrideTargetJob {
		var out []trainer.PodTemplateOverrideTargetJob
		for _, n := range names {
			out = append(out, trainer.PodTemplateOverrideTargetJob{Name: n})
		}
		return out
	}
	cases := map[string]struct {
		job     *trainer.TrainJob
		want    rtt.FieldErr
		wantBad string
	}{
		"v2.1 unknown target job": {
			job: rtt.MakeTrainJob("ns", "job").PodTemplateOverride(trainer.PodTemplateOverride{
				TargetJobs: targets("nope"), Spec: &trainer.PodTemplateSpecOverride{NodeSelector: map[string]string{"a": "b"}}}).Obj(),
			want:    rtt.FieldErr{Type: field.ErrorTypeNotFound, Field: "spec.podTemplateOverrides[0].targetJobs[0].name"},
			wantBad: "nope",
		},
		"v2.1 unknown second target job of the second override": {
			job: rtt.MakeTrainJob("ns", "job").
				PodTemplateOverride(trainer.PodTemplateOverride{TargetJobs: targets("node")}).
				PodTemplateOverride(trainer.PodTemplateOverride{TargetJobs: targets("node", "launcher")}).Obj(),
			want:    rtt.FieldErr{Type: field.ErrorTypeNotFound, Field: "spec.podTemplateOverrides[1].targetJobs[1].name"},
			wantBad: "launcher",
		},
		"v2.1 unknown container": {
			job: rtt.MakeTrainJob("ns", "job").PodTemplateOverride(trainer.PodTemplateOverride{
				TargetJobs: targets("node"),
				Spec: &trainer.PodTemplateSpecOverride{Containers: []trainer.ContainerOverride{
					{Name: "sidecar"}, {Name: "trainer", Env: []corev1.EnvVar{env("X", "1")}}}},
			}).Obj(),
			want:    rtt.FieldErr{Type: field.ErrorTypeNotFound, Field: "spec.podTemplateOverrides[0].spec.containers[1].name"},
			wantBad: "trainer",
		},
		"v2.1 unknown init container": {
			job: rtt.MakeTrainJob("ns", "job").PodTemplateOverride(trainer.PodTemplateOverride{
				TargetJobs: targets("node"),
				Spec:       &trainer.PodTemplateSpecOverride{InitContainers: []trainer.ContainerOverride{{Name: "sidecar"}}},
			}).Obj(),
			want:    rtt.FieldErr{Type: field.ErrorTypeNotFound, Field: "spec.podTemplateOverrides[0].spec.initContainers[0].name"},
			wantBad: "sidecar",
		},
		"v2.1 container missing in the second target job only": {
			job: rtt.MakeTrainJob("ns", "job").PodTemplateOverride(trainer.PodTemplateOverride{
				TargetJobs: targets("node", "dataset-initializer"),
				Spec:       &trainer.PodTemplateSpecOverride{Containers: []trainer.ContainerOverride{{Name: "sidecar"}}},
			}).Obj(),
			want:    rtt.FieldErr{Type: field.ErrorTypeNotFound, Field: "spec.podTemplateOverrides[0].spec.containers[0].name"},
			wantBad: "sidecar",
		},
		"v2.3 unknown replicated job": {
			job:     rtt.MakeTrainJob("ns", "job").RuntimePatch(v23("example.com/a", rjobPatch("nope", nil))).Obj(),
			want:    rtt.FieldErr{Type: field.ErrorTypeNotFound, Field: "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].name"},
			wantBad: "nope",
		},
		"v2.3 unknown replicated job without a template": {
			job: rtt.MakeTrainJob("ns", "job").RuntimePatch(v23("example.com/a",
				rjobPatch("node", nil), trainer.ReplicatedJobPatch{Name: "nope"})).Obj(),
			want:    rtt.FieldErr{Type: field.ErrorTypeNotFound, Field: "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[1].name"},
			wantBad: "nope",
		},
		"v2.3 unknown container in the second patch": {
			job: rtt.MakeTrainJob("ns", "job").
				RuntimePatch(v23("example.com/a", rjobPatch("node", containers("node")))).
				RuntimePatch(v23("example.com/b", rjobPatch("dataset-initializer", containers("dataset-initializer")), rjobPatch("node", containers("sidecar", "nope")))).Obj(),
			want:    rtt.FieldErr{Type: field.ErrorTypeNotFound, Field: "spec.runtimePatches[1].trainingRuntimeSpec.template.spec.replicatedJobs[1].template.spec.template.spec.containers[1].name"},
			wantBad: "nope",
		},
		"v2.3 unknown init container": {
			job: rtt.MakeTrainJob("ns", "job").RuntimePatch(v23("example.com/a", rjobPatch("node", &trainer.PodSpecPatch{
				InitContainers: []trainer.ContainerPatch{{Name: "node"}}}))).Obj(),
			want:    rtt.FieldErr{Type: field.ErrorTypeNotFound, Field: "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec.initContainers[0].name"},
			wantBad: "node",
		},
	}
	rt := rtt.MakeTorchRuntime("torch").
		Container("node", rtt.MakeContainer("sidecar", "s:1")).
		ReplicatedJob(rtt.MakeReplicatedJob("dataset-initializer", trainer.AncestorDatasetInitializer, rtt.MakeContainer("dataset-initializer", "ds:1"))).
		Obj()
	fw, err := plugins.NewFramework()
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := runtime.NewInfo(runtime.TrainJobRequest(tc.job), rt)
			if diff := cmp.Diff([]rtt.FieldErr{tc.want}, rtt.FieldErrsOf(err)); diff != "" {
				t.Fatalf("NewInfo error (-want +got):\n%s", diff)
			}
			fe, ok := err.(*field.Error)
			if !ok {
				t.Fatalf("NewInfo error is %T, want *field.Error", err)
			}
			if fe.BadValue != tc.wantBad {
				t.Errorf("bad value = %v, want %q", fe.BadValue, tc.wantBad)
			}

			// The pipeline reports the same error as an InvalidError.
			_, err = fw.Build(runtime.TrainJobRequest(tc.job), rt)
			if !framework.IsInvalid(err) {
				t.Fatalf("Build error = %v, want an InvalidError", err)
			}
			if diff := cmp.Diff([]rtt.FieldErr{tc.want}, rtt.FieldErrsOf(err)); diff != "" {
				t.Errorf("Build error (-want +got):\n%s", diff)
			}
			// And Validate as a field error list.
			if diff := cmp.Diff([]rtt.FieldErr{tc.want}, rtt.FieldErrs(fw.Validate(rt, runtime.TrainJobRequest(tc.job)))); diff != "" {
				t.Errorf("Validate (-want +got):\n%s", diff)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// v2.1 and v2.3 forms through the whole pipeline

var (
	eqNodeSelector = map[string]string{"cloud.google.com/gke-accelerator": "nvidia-a100-80gb"}
	eqTolerations  = []corev1.Toleration{
		{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "ml", Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](30)},
	}
	eqVolumes = []corev1.Volume{
		{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "datasets", ReadOnly: true}}},
		{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
	}
	eqSidecarEnv = []corev1.EnvVar{
		env("LOG_LEVEL", "debug"),
		{Name: "UPLOAD_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "upload"}, Key: "token"}}},
	}
	eqSidecarMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data", ReadOnly: true}}
	eqNodeMounts    = []corev1.VolumeMount{{Name: "data", MountPath: "/data", ReadOnly: true}, {Name: "cache", MountPath: "/dev/shm"}}
	eqJobLabels     = map[string]string{"kueue.x-k8s.io/queue-name": "team-a", "team": "a"}
	eqJobAnnos      = map[string]string{"owner": "alice"}
	eqPodLabels     = map[string]string{"app": "llama"}
	eqPodAnnos      = map[string]string{"sidecar.istio.io/inject": "false"}
)

// equivRuntime is torch-distributed with a logging sidecar next to the node
// container and a dataset initializer.
func equivRuntime() *runtime.Runtime {
	return rtt.MakeTorchRuntime("torch-distributed").
		Labels(map[string]string{"trainer.kubeflow.org/framework": "torch"}).
		Annotations(map[string]string{"runtime": "annotation"}).
		TrainerResources(rtt.Limits("nvidia.com/gpu", "8")).
		Container("node", corev1.Container{Name: "logger", Image: "fluent-bit:3",
			Env:          []corev1.EnvVar{env("LOG_LEVEL", "info"), env("KEEP", "1")},
			VolumeMounts: []corev1.VolumeMount{{Name: "cache", MountPath: "/cache"}},
		}).
		PodSpec("node", func(ps *corev1.PodSpec) {
			ps.Volumes = []corev1.Volume{{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			ps.NodeSelector = map[string]string{"pool": "training"}
		}).
		ReplicatedJob(rtt.MakeReplicatedJob("dataset-initializer", trainer.AncestorDatasetInitializer,
			corev1.Container{Name: "dataset-initializer", Image: "kubeflow/dataset-initializer:v2",
				VolumeMounts: []corev1.VolumeMount{{Name: "initializer", MountPath: "/workspace"}}})).
		Obj()
}

// equivBase is the part of the TrainJob both forms share.
func equivBase() *rtt.TrainJobWrapper {
	return rtt.MakeTrainJob("research", "llama").
		NumNodes(2).
		Image("ghcr.io/me/llama:1").
		Command("torchrun", "train.py").
		Env(env("NCCL_DEBUG", "INFO")).
		ResourcesPerNode(rtt.Requests("memory", "64Gi")).
		DatasetInitializer("hf://tatsu-lab/alpaca", "hf-token")
}

func equivV21() *trainer.TrainJob {
	return equivBase().
		Labels(eqJobLabels).
		Annotations(eqJobAnnos).
		PodTemplateOverride(trainer.PodTemplateOverride{
			TargetJobs: []trainer.PodTemplateOverrideTargetJob{{Name: "node"}, {Name: "dataset-initializer"}},
			Metadata:   &metav1.ObjectMeta{Labels: eqPodLabels, Annotations: eqPodAnnos},
			Spec: &trainer.PodTemplateSpecOverride{
				ServiceAccountName: ptr.To("llama-trainer"),
				NodeSelector:       eqNodeSelector,
				Tolerations:        eqTolerations,
				Volumes:            eqVolumes,
				ImagePullSecrets:   []corev1.LocalObjectReference{{Name: "ghcr"}},
				SchedulingGates:    []corev1.PodSchedulingGate{{Name: "example.com/quota"}},
			},
		}).
		PodTemplateOverride(trainer.PodTemplateOverride{
			TargetJobs: []trainer.PodTemplateOverrideTargetJob{{Name: "node"}},
			Spec: &trainer.PodTemplateSpecOverride{Containers: []trainer.ContainerOverride{
				{Name: "logger", Env: eqSidecarEnv, VolumeMounts: eqSidecarMounts},
				{Name: "node", VolumeMounts: eqNodeMounts},
			}},
		}).
		Obj()
}

// sharedPodSpecPatch is the first override in the v2.3 shape.
func sharedPodSpecPatch() *trainer.PodSpecPatch {
	return &trainer.PodSpecPatch{
		ServiceAccountName: ptr.To("llama-trainer"),
		NodeSelector:       eqNodeSelector,
		Tolerations:        eqTolerations,
		Volumes:            eqVolumes,
		ImagePullSecrets:   []corev1.LocalObjectReference{{Name: "ghcr"}},
		SchedulingGates:    []corev1.PodSchedulingGate{{Name: "example.com/quota"}},
	}
}

func containerPatches() []trainer.ContainerPatch {
	return []trainer.ContainerPatch{
		{Name: "logger", Env: eqSidecarEnv, VolumeMounts: eqSidecarMounts},
		{Name: "node", VolumeMounts: eqNodeMounts},
	}
}

func rjPatch(name string, md *metav1.ObjectMeta, ps *trainer.PodSpecPatch) trainer.ReplicatedJobPatch {
	return trainer.ReplicatedJobPatch{Name: name, Template: &trainer.JobTemplatePatch{
		Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{Metadata: md, Spec: ps}}}}
}

func rtPatch(manager string, md *metav1.ObjectMeta, rjs ...trainer.ReplicatedJobPatch) trainer.RuntimePatch {
	p := trainer.RuntimePatch{Manager: manager, TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{
		Template: &trainer.JobSetTemplatePatch{Metadata: md}}}
	if len(rjs) > 0 {
		p.TrainingRuntimeSpec.Template.Spec = &trainer.JobSetSpecPatch{ReplicatedJobs: rjs}
	}
	return p
}

func equivV23Variants() map[string]*trainer.TrainJob {
	podMD := func() *metav1.ObjectMeta { return &metav1.ObjectMeta{Labels: eqPodLabels, Annotations: eqPodAnnos} }
	jobMD := func() *metav1.ObjectMeta { return &metav1.ObjectMeta{Labels: eqJobLabels, Annotations: eqJobAnnos} }
	withContainers := func() *trainer.PodSpecPatch {
		ps := sharedPodSpecPatch()
		ps.Containers = containerPatches()
		return ps
	}
	return map[string]*trainer.TrainJob{
		"one runtimePatch per v2.1 entry": equivBase().
			RuntimePatch(rtPatch("example.com/metadata", jobMD())).
			RuntimePatch(rtPatch("example.com/scheduling", nil,
				rjPatch("node", podMD(), sharedPodSpecPatch()),
				rjPatch("dataset-initializer", podMD(), sharedPodSpecPatch()))).
			RuntimePatch(rtPatch("example.com/sidecar", nil,
				rjPatch("node", nil, &trainer.PodSpecPatch{Containers: containerPatches()}))).
			Obj(),
		"one runtimePatch for everything": equivBase().
			RuntimePatch(rtPatch("trainer.kubeflow.org/kubeflow-sdk", jobMD(),
				rjPatch("node", podMD(), withContainers()),
				rjPatch("dataset-initializer", podMD(), sharedPodSpecPatch()))).
			Obj(),
		"replicated jobs in another order": equivBase().
			RuntimePatch(rtPatch("trainer.kubeflow.org/kubeflow-sdk", jobMD(),
				rjPatch("dataset-initializer", podMD(), sharedPodSpecPatch()),
				rjPatch("node", podMD(), withContainers()))).
			Obj(),
		"v2.1 metadata with a v2.3 pod patch": equivBase().
			Labels(eqJobLabels).Annotations(eqJobAnnos).
			RuntimePatch(rtPatch("kueue.x-k8s.io/manager", nil,
				rjPatch("node", podMD(), withContainers()),
				rjPatch("dataset-initializer", podMD(), sharedPodSpecPatch()))).
			Obj(),
	}
}

func buildJobSet(t *testing.T, job *trainer.TrainJob, rt *runtime.Runtime) *jobsetv1alpha2.JobSet {
	t.Helper()
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
		t.Fatalf("Build returned %d objects, want 1", len(objs))
	}
	js, ok := objs[0].(*jobsetv1alpha2.JobSet)
	if !ok {
		t.Fatalf("Build returned %T, want *JobSet", objs[0])
	}
	return js
}

// The key compatibility property: a Kubeflow Trainer v2.1 TrainJob and the same
// request written as v2.3 runtimePatches produce the same JobSet.
func TestV21AndV23BuildTheSameJobSet(t *testing.T) {
	rt := equivRuntime()
	want := buildJobSet(t, equivV21(), rt)

	// First make sure the overrides did something, so that the comparison is not
	// between two JobSets that both ignored them.
	t.Run("v2.1 overrides are applied", func(t *testing.T) {
		wantLabels := map[string]string{"trainer.kubeflow.org/framework": "torch", "kueue.x-k8s.io/queue-name": "team-a", "team": "a"}
		if diff := cmp.Diff(wantLabels, want.Labels); diff != "" {
			t.Errorf("JobSet labels (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[string]string{"runtime": "annotation", "owner": "alice"}, want.Annotations); diff != "" {
			t.Errorf("JobSet annotations (-want +got):\n%s", diff)
		}
		node := want.Spec.ReplicatedJobs[0].Template.Spec.Template
		if diff := cmp.Diff(metav1.ObjectMeta{Labels: eqPodLabels, Annotations: eqPodAnnos}, node.ObjectMeta); diff != "" {
			t.Errorf("node pod metadata (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[string]string{"pool": "training", "cloud.google.com/gke-accelerator": "nvidia-a100-80gb"}, node.Spec.NodeSelector); diff != "" {
			t.Errorf("nodeSelector (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(eqTolerations, node.Spec.Tolerations); diff != "" {
			t.Errorf("tolerations (-want +got):\n%s", diff)
		}
		// Order is checked by TestApplyPatch; here only the content.
		byName := cmpopts.SortSlices(func(a, b corev1.EnvVar) bool { return a.Name < b.Name })
		if diff := cmp.Diff(eqVolumes, node.Spec.Volumes, unorderedLists); diff != "" {
			t.Errorf("volumes (-want +got):\n%s", diff)
		}
		if node.Spec.ServiceAccountName != "llama-trainer" {
			t.Errorf("serviceAccountName = %q", node.Spec.ServiceAccountName)
		}
		logger, nodeC := containerNamed(node.Spec.Containers, "logger"), containerNamed(node.Spec.Containers, "node")
		if logger == nil || nodeC == nil || len(node.Spec.Containers) != 2 {
			t.Fatalf("containers = %+v, want node and logger", node.Spec.Containers)
		}
		wantLoggerEnv := []corev1.EnvVar{env("LOG_LEVEL", "debug"), env("KEEP", "1"), eqSidecarEnv[1]}
		if diff := cmp.Diff(wantLoggerEnv, logger.Env, byName); diff != "" {
			t.Errorf("logger env (-want +got):\n%s", diff)
		}
		wantLoggerMounts := []corev1.VolumeMount{{Name: "cache", MountPath: "/cache"}, eqSidecarMounts[0]}
		if diff := cmp.Diff(wantLoggerMounts, logger.VolumeMounts, unorderedLists); diff != "" {
			t.Errorf("logger volumeMounts (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(eqNodeMounts, nodeC.VolumeMounts, unorderedLists); diff != "" {
			t.Errorf("node volumeMounts (-want +got):\n%s", diff)
		}
		if nodeC.Image != "ghcr.io/me/llama:1" || len(nodeC.Env) != 6 || nodeC.Env[0].Name != "NCCL_DEBUG" {
			t.Errorf("node container lost the trainer fields or the torch env: %+v", nodeC)
		}
		init := want.Spec.ReplicatedJobs[1].Template.Spec.Template
		if diff := cmp.Diff(eqNodeSelector, init.Spec.NodeSelector); diff != "" {
			t.Errorf("initializer nodeSelector (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(eqPodLabels, init.Labels); diff != "" {
			t.Errorf("initializer pod labels (-want +got):\n%s", diff)
		}
	})

	for name, job := range equivV23Variants() {
		t.Run(name, func(t *testing.T) {
			got := buildJobSet(t, job, rt)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("JobSet of the v2.3 TrainJob differs from the v2.1 one (-v2.1 +v2.3):\n%s", diff)
			}
		})
	}
}

func containerNamed(cs []corev1.Container, name string) *corev1.Container {
	for k := range cs {
		if cs[k].Name == name {
			return &cs[k]
		}
	}
	return nil
}

// The lists of a patch are maps keyed by name (listType=map): writing their
// entries in another order is the same TrainJob, and must give the same JobSet.
func TestV21AndV23ListOrderDoesNotMatter(t *testing.T) {
	rt := equivRuntime()
	want := buildJobSet(t, equivV21(), rt) // containers [logger, node], env [LOG_LEVEL, UPLOAD_TOKEN]
	reversedContainers := []trainer.ContainerPatch{
		{Name: "node", VolumeMounts: eqNodeMounts},
		{Name: "logger", Env: []corev1.EnvVar{eqSidecarEnv[1], eqSidecarEnv[0]}, VolumeMounts: eqSidecarMounts},
	}
	cases := map[string]*trainer.TrainJob{
		"v2.3 with containers and env listed in another order": equivBase().
			Labels(eqJobLabels).Annotations(eqJobAnnos).
			RuntimePatch(rtPatch("example.com/a", nil,
				rjPatch("node", &metav1.ObjectMeta{Labels: eqPodLabels, Annotations: eqPodAnnos}, func() *trainer.PodSpecPatch {
					ps := sharedPodSpecPatch()
					ps.Containers = reversedContainers
					return ps
				}()),
				rjPatch("dataset-initializer", &metav1.ObjectMeta{Labels: eqPodLabels, Annotations: eqPodAnnos}, sharedPodSpecPatch()))).
			Obj(),
	}
	for name, job := range cases {
		t.Run(name, func(t *testing.T) {
			got := buildJobSet(t, job, rt)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("JobSet depends on the order of map-keyed patch lists (-v2.1 +v2.3):\n%s", diff)
			}
		})
	}
}

// Build never changes its inputs, and building twice gives the same result.
func TestBuildDoesNotMutateInputs(t *testing.T) {
	elastic := rtt.MakeTorchRuntime("elastic").
		Container("node", rtt.MakeContainer("sidecar", "s:1")).
		ContainerEnv("node", "node", env("RUNTIME", "1")).
		TrainerResources(corev1.ResourceRequirements{Requests: rtt.ResourceList("cpu", "3500m"), Limits: rtt.ResourceList("nvidia.com/gpu", "2")}).
		MLPolicy(&trainer.MLPolicy{MLPolicySource: trainer.MLPolicySource{Torch: &trainer.TorchMLPolicySource{
			NumProcPerNode: ptr.To(intstr.FromString("gpu")),
			ElasticPolicy:  &trainer.TorchElasticPolicy{MinNodes: ptr.To[int32](1), MaxNodes: ptr.To[int32](4), MaxRestarts: ptr.To[int32](2)},
			EnvInjection:   &trainer.EnvInjection{Targets: []trainer.EnvInjectionTarget{{JobName: "node", ContainerNames: []string{"sidecar"}}}},
		}}}).Obj()
	cases := map[string]struct {
		job *trainer.TrainJob
		rt  *runtime.Runtime
	}{
		"v2.1":            {job: equivV21(), rt: equivRuntime()},
		"v2.3":            {job: equivV23Variants()["one runtimePatch for everything"], rt: equivRuntime()},
		"elastic":         {job: rtt.MakeTrainJob("ns", "job").ResourcesPerNode(rtt.Limits("memory", "1Gi")).Env(env("U", "1")).Obj(), rt: elastic},
		"shipped runtime": {job: rtt.MakeTrainJob("ns", "job").NumNodes(3).Suspend(true).Obj(), rt: rtt.MustTorchDistributedRuntime()},
	}
	fw, err := plugins.NewFramework()
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			jobBefore, rtBefore := tc.job.DeepCopy(), *tc.rt
			rtBefore.Spec = *tc.rt.Spec.DeepCopy()

			built, err := fw.Build(runtime.TrainJobRequest(tc.job), tc.rt)
			first := built.Objects()
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			if diff := cmp.Diff(jobBefore, tc.job); diff != "" {
				t.Errorf("Build changed the TrainJob (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(&rtBefore, tc.rt); diff != "" {
				t.Errorf("Build changed the runtime (-before +after):\n%s", diff)
			}
			// Changing the output must not reach back into the inputs either.
			js := first[0].(*jobsetv1alpha2.JobSet)
			for k := range js.Spec.ReplicatedJobs {
				ps := &js.Spec.ReplicatedJobs[k].Template.Spec.Template.Spec
				for c := range ps.Containers {
					for e := range ps.Containers[c].Env {
						ps.Containers[c].Env[e].Value = "mutated"
					}
					for r := range ps.Containers[c].Resources.Limits {
						ps.Containers[c].Resources.Limits[r] = rtt.ResourceList("cpu", "999")["cpu"]
					}
				}
				for key := range ps.NodeSelector {
					ps.NodeSelector[key] = "mutated"
				}
				for key := range js.Spec.ReplicatedJobs[k].Template.Labels {
					js.Spec.ReplicatedJobs[k].Template.Labels[key] = "mutated"
				}
			}
			for key := range js.Labels {
				js.Labels[key] = "mutated"
			}
			if diff := cmp.Diff(jobBefore, tc.job); diff != "" {
				t.Errorf("the JobSet aliases the TrainJob (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(&rtBefore, tc.rt); diff != "" {
				t.Errorf("the JobSet aliases the runtime (-before +after):\n%s", diff)
			}

			built2, err := fw.Build(runtime.TrainJobRequest(tc.job), tc.rt)
			second := built2.Objects()
			if err != nil {
				t.Fatalf("second Build: %v", err)
			}
			built3, err := fw.Build(runtime.TrainJobRequest(jobBefore), &rtBefore)
			third := built3.Objects()
			if err != nil {
				t.Fatalf("third Build: %v", err)
			}
			if diff := cmp.Diff([]client.Object(second), []client.Object(third)); diff != "" {
				t.Errorf("Build is not deterministic (-second +third):\n%s", diff)
			}
		})
	}
}
