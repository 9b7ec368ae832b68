package runtime_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/plugins"
)

// fuzzOverride is one request made from fuzz input, written both ways: as
// v2.1 spec.labels and a podTemplateOverride, and as two v2.3 runtimePatches.
type fuzzOverride struct {
	jobLabel, podLabel, env, value, selector, sa string
	targets, container, flags                    byte
}

func (o fuzzOverride) jobNames() []string {
	var out []string
	for i, name := range []string{"node", "dataset-initializer", "launcher"} {
		if o.targets&(1<<i) != 0 {
			out = append(out, name)
		}
	}
	return out
}

func (o fuzzOverride) meta(label string) map[string]string {
	if label == "" {
		return nil
	}
	return map[string]string{"example.com/" + label: label}
}

// pod is the override's pod spec in both shapes.
func (o fuzzOverride) pod() (*trainer.PodTemplateSpecOverride, *trainer.PodSpecPatch) {
	v21 := &trainer.PodTemplateSpecOverride{NodeSelector: o.meta(o.selector)}
	v23 := &trainer.PodSpecPatch{NodeSelector: o.meta(o.selector)}
	if o.flags&1 != 0 {
		v21.ServiceAccountName, v23.ServiceAccountName = ptr.To(o.sa), ptr.To(o.sa)
	}
	if o.flags&2 != 0 {
		tol := []corev1.Toleration{{Key: "example.com/" + o.selector, Operator: corev1.TolerationOpExists}}
		v21.Tolerations, v23.Tolerations = tol, tol
	}
	if o.flags&4 != 0 {
		vol := []corev1.Volume{{Name: "cache", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/" + o.value}}}}
		v21.Volumes, v23.Volumes = vol, vol
	}
	if o.flags&8 != 0 {
		gates := []corev1.PodSchedulingGate{{Name: "example.com/" + o.sa}}
		v21.SchedulingGates, v23.SchedulingGates = gates, gates
	}
	if o.flags&16 != 0 {
		secrets := []corev1.LocalObjectReference{{Name: o.sa}}
		v21.ImagePullSecrets, v23.ImagePullSecrets = secrets, secrets
	}
	if o.flags&32 != 0 {
		name := []string{"logger", "node", "dataset-initializer", "ghost"}[o.container%4]
		env := []corev1.EnvVar{{Name: o.env, Value: o.value}}
		mounts := []corev1.VolumeMount{{Name: "cache", MountPath: "/" + o.value}}
		if o.flags&64 != 0 {
			v21.InitContainers = []trainer.ContainerOverride{{Name: name, Env: env, VolumeMounts: mounts}}
			v23.InitContainers = []trainer.ContainerPatch{{Name: name, Env: env, VolumeMounts: mounts}}
		} else {
			v21.Containers = []trainer.ContainerOverride{{Name: name, Env: env, VolumeMounts: mounts}}
			v23.Containers = []trainer.ContainerPatch{{Name: name, Env: env, VolumeMounts: mounts}}
		}
	}
	return v21, v23
}

func (o fuzzOverride) jobs() (v21, v23 *trainer.TrainJob) {
	v21, v23 = equivBase().Obj(), equivBase().Obj()
	v21.Spec.Labels = o.meta(o.jobLabel)
	var podMeta *metav1.ObjectMeta
	if labels := o.meta(o.podLabel); labels != nil {
		podMeta = &metav1.ObjectMeta{Labels: labels}
	}
	pod21, pod23 := o.pod()
	override := trainer.PodTemplateOverride{Metadata: podMeta.DeepCopy(), Spec: pod21}
	var rjobs []trainer.ReplicatedJobPatch
	for _, name := range o.jobNames() {
		override.TargetJobs = append(override.TargetJobs, trainer.PodTemplateOverrideTargetJob{Name: name})
		rjobs = append(rjobs, trainer.ReplicatedJobPatch{Name: name, Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{
			Template: &trainer.PodTemplatePatch{Metadata: podMeta.DeepCopy(), Spec: pod23.DeepCopy()},
		}}})
	}
	v21.Spec.PodTemplateOverrides = []trainer.PodTemplateOverride{override}
	if labels := o.meta(o.jobLabel); labels != nil {
		v23.Spec.RuntimePatches = append(v23.Spec.RuntimePatches, trainer.RuntimePatch{Manager: "example.com/labels",
			TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{Metadata: &metav1.ObjectMeta{Labels: labels}}}})
	}
	v23.Spec.RuntimePatches = append(v23.Spec.RuntimePatches, trainer.RuntimePatch{Manager: "example.com/pods",
		TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: rjobs}}}})
	return v21, v23
}

// FuzzV21V23Agree: a request written as v2.1 labels and podTemplateOverrides
// and the same request written as v2.3 runtimePatches normalise to the same
// changes of the runtime, and build the same JobSet, or both fail.
func FuzzV21V23Agree(f *testing.F) {
	for _, o := range fuzzOverridesThatBuild {
		f.Add(o.jobLabel, o.podLabel, o.env, o.value, o.selector, o.sa, o.targets, o.container, o.flags)
	}
	f.Add("team", "pod", "X", "1", "zone", "trainer", byte(1), byte(0), byte(0xff))
	f.Add("", "", "NCCL_DEBUG", "INFO", "a100", "sa", byte(3), byte(2), byte(32+64))
	f.Add("q", "", "A", "", "", "", byte(4), byte(3), byte(32))
	f.Add("", "p", "", "v", "s", "", byte(0), byte(1), byte(32+4))
	rt := equivRuntime()
	fw, err := plugins.NewFramework()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, jobLabel, podLabel, env, value, selector, sa string, targets, container, flags byte) {
		o := fuzzOverride{jobLabel: jobLabel, podLabel: podLabel, env: env, value: value, selector: selector, sa: sa,
			targets: targets, container: container, flags: flags}
		v21, v23 := o.jobs()

		n21, n23 := runtime.NormalizePatches(v21), runtime.NormalizePatches(v23)
		if len(n21) != len(n23) {
			t.Fatalf("%d patches from v2.1, %d from v2.3", len(n21), len(n23))
		}
		for i := range n21 {
			if diff := cmp.Diff(n21[i].Patch.TrainingRuntimeSpec, n23[i].Patch.TrainingRuntimeSpec, cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("patch %d: v2.1 and v2.3 normalise differently (-v2.1 +v2.3):\n%s", i, diff)
			}
		}

		p21, err21 := fw.Build(runtime.TrainJobRequest(v21), rt)
		p23, err23 := fw.Build(runtime.TrainJobRequest(v23), rt)
		if (err21 == nil) != (err23 == nil) {
			t.Fatalf("v2.1 error %v, v2.3 error %v", err21, err23)
		}
		if diff := cmp.Diff(p21.Objects(), p23.Objects()); diff != "" {
			t.Fatalf("v2.1 and v2.3 build different objects (-v2.1 +v2.3):\n%s", diff)
		}
	})
}

// fuzzOverridesThatBuild are seeds that change the JobSet, so that the fuzzer
// starts from comparisons of JobSets, not of two errors.
var fuzzOverridesThatBuild = []fuzzOverride{
	{jobLabel: "team", podLabel: "pod", env: "X", value: "1", selector: "zone", sa: "trainer", targets: 1, container: 0, flags: 0x3f},
	{selector: "a100", sa: "sa", value: "data", targets: 3, flags: 0x1f},
}

func TestFuzzOverridesThatBuild(t *testing.T) {
	rt := equivRuntime()
	fw, err := plugins.NewFramework()
	if err != nil {
		t.Fatal(err)
	}
	plain, err := fw.Build(runtime.TrainJobRequest(equivBase().Obj()), rt)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range fuzzOverridesThatBuild {
		v21, _ := o.jobs()
		p, err := fw.Build(runtime.TrainJobRequest(v21), rt)
		if err != nil {
			t.Fatalf("seed %d: %v", i, err)
		}
		if cmp.Equal(plain.Objects(), p.Objects()) {
			t.Errorf("seed %d changed nothing", i)
		}
	}
}
