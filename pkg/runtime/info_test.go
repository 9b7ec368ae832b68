package runtime_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
	rtt "github.com/trainyard/trainyard/test/util/rtt"
)

var env = rtt.Env

// initRuntime has a trainer job and both initializer jobs.
func initRuntime() *rtt.RuntimeWrapper {
	return rtt.MakeTorchRuntime("torch").
		ReplicatedJob(
			rtt.MakeReplicatedJob("dataset-initializer", trainer.AncestorDatasetInitializer, rtt.MakeContainer("dataset-initializer", "ds:1")),
			rtt.MakeReplicatedJob("model-initializer", trainer.AncestorModelInitializer, rtt.MakeContainer("model-initializer", "model:1")),
		)
}

func TestNewInfoTrainer(t *testing.T) {
	rtWithNode := func() *rtt.RuntimeWrapper {
		return rtt.MakeTorchRuntime("torch").PodSpec("node", func(ps *corev1.PodSpec) {
			ps.Containers[0].Command = []string{"python"}
			ps.Containers[0].Args = []string{"train.py"}
			ps.Containers[0].Env = []corev1.EnvVar{env("A", "1"), env("B", "2"), env("C", "3")}
		}).Container("node", rtt.MakeContainer("sidecar", "sidecar:1"))
	}
	cases := map[string]struct {
		rt        *runtime.Runtime
		job       *trainer.TrainJob
		want      corev1.Container
		wantNodes int32
		wantErr   []rtt.FieldErr
	}{
		"no trainer: the runtime's container as is": {
			rt:        rtWithNode().Obj(),
			job:       rtt.MakeTrainJob("ns", "job").Obj(),
			want:      corev1.Container{Name: "node", Image: "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime", Command: []string{"python"}, Args: []string{"train.py"}, Env: []corev1.EnvVar{env("A", "1"), env("B", "2"), env("C", "3")}},
			wantNodes: 1,
		},
		"image, command and args replace, env is upserted": {
			rt: rtWithNode().Obj(),
			job: rtt.MakeTrainJob("ns", "job").Image("me/train:2").Command("torchrun").Args("--standalone", "x.py").
				Env(env("B", "20"), env("D", "40"), env("A", "10")).Obj(),
			want: corev1.Container{Name: "node", Image: "me/train:2", Command: []string{"torchrun"}, Args: []string{"--standalone", "x.py"},
				Env: []corev1.EnvVar{env("A", "10"), env("B", "20"), env("C", "3"), env("D", "40")}},
			wantNodes: 1,
		},
		"only env": {
			rt:  rtWithNode().Obj(),
			job: rtt.MakeTrainJob("ns", "job").Env(env("C", "30")).Obj(),
			want: corev1.Container{Name: "node", Image: "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime", Command: []string{"python"}, Args: []string{"train.py"},
				Env: []corev1.EnvVar{env("A", "1"), env("B", "2"), env("C", "30")}},
			wantNodes: 1,
		},
		"env with valueFrom replaces a plain value": {
			rt: rtWithNode().Obj(),
			job: rtt.MakeTrainJob("ns", "job").Env(corev1.EnvVar{Name: "B", ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}}).Obj(),
			want: corev1.Container{Name: "node", Image: "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime", Command: []string{"python"}, Args: []string{"train.py"},
				Env: []corev1.EnvVar{env("A", "1"), {Name: "B", ValueFrom: &corev1.EnvVarSource{
					SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}}, env("C", "3")}},
			wantNodes: 1,
		},
		"numNodes from the runtime's mlPolicy": {
			rt:        rtWithNode().NumNodes(3).Obj(),
			job:       rtt.MakeTrainJob("ns", "job").Obj(),
			want:      corev1.Container{Name: "node", Image: "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime", Command: []string{"python"}, Args: []string{"train.py"}, Env: []corev1.EnvVar{env("A", "1"), env("B", "2"), env("C", "3")}},
			wantNodes: 3,
		},
		"numNodes from the trainer wins": {
			rt:        rtWithNode().NumNodes(3).Obj(),
			job:       rtt.MakeTrainJob("ns", "job").NumNodes(5).Obj(),
			want:      corev1.Container{Name: "node", Image: "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime", Command: []string{"python"}, Args: []string{"train.py"}, Env: []corev1.EnvVar{env("A", "1"), env("B", "2"), env("C", "3")}},
			wantNodes: 5,
		},
		"image on a runtime without a trainer job": {
			rt: rtt.MakeRuntime(trainer.ClusterTrainingRuntimeKind, "plain").ReplicatedJobs(
				rtt.MakeReplicatedJob("main", "", rtt.MakeContainer("node", "x"))).Obj(),
			job:     rtt.MakeTrainJob("ns", "job").Image("me/train:2").Obj(),
			wantErr: []rtt.FieldErr{{Type: field.ErrorTypeInvalid, Field: "spec.trainer"}},
		},
		"env on a trainer job without a node container": {
			rt: rtt.MakeRuntime(trainer.ClusterTrainingRuntimeKind, "plain").ReplicatedJobs(
				rtt.MakeReplicatedJob("main", "trainer", rtt.MakeContainer("trainer", "x"))).Obj(),
			job:     rtt.MakeTrainJob("ns", "job").Env(env("A", "1")).Obj(),
			wantErr: []rtt.FieldErr{{Type: field.ErrorTypeInvalid, Field: "spec.trainer"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			info, err := runtime.NewInfo(runtime.TrainJobRequest(tc.job), tc.rt)
			if diff := cmp.Diff(tc.wantErr, rtt.FieldErrsOf(err)); diff != "" {
				t.Fatalf("NewInfo error (-want +got):\n%s", diff)
			}
			if err != nil {
				return
			}
			if info.TrainerJob != "node" {
				t.Errorf("TrainerJob = %q, want node", info.TrainerJob)
			}
			if diff := cmp.Diff(tc.want, *info.TrainerContainer()); diff != "" {
				t.Errorf("node container (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(rtt.MakeContainer("sidecar", "sidecar:1"), *info.Container("node", "sidecar")); diff != "" {
				t.Errorf("sidecar changed (-want +got):\n%s", diff)
			}
			if info.NumNodes != tc.wantNodes {
				t.Errorf("NumNodes = %d, want %d", info.NumNodes, tc.wantNodes)
			}
		})
	}
}

// The Info is a private copy: changing it changes neither the runtime nor the TrainJob.
func TestNewInfoIsACopy(t *testing.T) {
	rt := initRuntime().Labels(map[string]string{"a": "1"}).Annotations(map[string]string{"b": "2"}).
		ContainerEnv("node", "node", env("A", "1")).Obj()
	job := rtt.MakeTrainJob("ns", "job").Env(env("U", "1")).DatasetInitializer("hf://x", "s", env("D", "1")).Obj()
	rtBefore, jobBefore := rt.Spec.DeepCopy(), job.DeepCopy()

	info, err := runtime.NewInfo(runtime.TrainJobRequest(job), rt)
	if err != nil {
		t.Fatal(err)
	}
	info.Labels["a"] = "changed"
	info.Annotations["b"] = "changed"
	info.TrainerContainer().Env[0].Value = "changed"
	info.TrainerContainer().Env[1].Value = "changed"
	info.Spec.ReplicatedJobs[0].Template.Labels["x"] = "y"
	info.Spec.ReplicatedJobs[0].Name = "changed"

	if diff := cmp.Diff(rtBefore, &rt.Spec); diff != "" {
		t.Errorf("runtime changed through the Info (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(jobBefore, job); diff != "" {
		t.Errorf("TrainJob changed through the Info (-before +after):\n%s", diff)
	}
}

func TestInfoAccessors(t *testing.T) {
	rt := initRuntime().Container("node", rtt.MakeContainer("sidecar", "s:1")).Obj()
	info, err := runtime.NewInfo(runtime.TrainJobRequest(rtt.MakeTrainJob("ns", "job").Obj()), rt)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		got, want any
	}{
		"MLPolicy is the runtime's":    {got: info.MLPolicy(), want: rt.Spec.MLPolicy},
		"TrainerJob":                   {got: info.TrainerJob, want: "node"},
		"ReplicatedJob found":          {got: info.ReplicatedJob("model-initializer").Name, want: "model-initializer"},
		"ReplicatedJob missing":        {got: info.ReplicatedJob("nope") == nil, want: true},
		"PodSpec missing":              {got: info.PodSpec("nope") == nil, want: true},
		"Container found":              {got: info.Container("node", "sidecar").Image, want: "s:1"},
		"Container missing":            {got: info.Container("node", "nope") == nil, want: true},
		"Container of a missing job":   {got: info.Container("nope", "node") == nil, want: true},
		"TrainerContainer":             {got: info.TrainerContainer().Name, want: "node"},
		"AncestorJob trainer":          {got: runtime.AncestorJob(&info.Spec, "trainer"), want: "node"},
		"AncestorJob model":            {got: runtime.AncestorJob(&info.Spec, "model-initializer"), want: "model-initializer"},
		"AncestorJob missing":          {got: runtime.AncestorJob(&info.Spec, "nope"), want: ""},
		"AncestorJob of an empty spec": {got: runtime.AncestorJob(&jobsetv1alpha2.JobSetSpec{}, "trainer"), want: ""},
		"Container returns a pointer into the Info": {got: func() string {
			info.Container("node", "sidecar").Image = "s:2"
			return info.PodSpec("node").Containers[1].Image
		}(), want: "s:2"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}

	noTrainer, err := runtime.NewInfo(runtime.TrainJobRequest(rtt.MakeTrainJob("ns", "job").Obj()),
		rtt.MakeRuntime("TrainingRuntime", "x").ReplicatedJobs(rtt.MakeReplicatedJob("main", "", rtt.MakeContainer("node", "x"))).Obj())
	if err != nil {
		t.Fatal(err)
	}
	if noTrainer.TrainerJob != "" || noTrainer.TrainerContainer() != nil || noTrainer.MLPolicy() != nil {
		t.Errorf("runtime without trainer: TrainerJob=%q TrainerContainer=%v MLPolicy=%v, want empty",
			noTrainer.TrainerJob, noTrainer.TrainerContainer(), noTrainer.MLPolicy())
	}
}

func TestUpsertEnv(t *testing.T) {
	secret := corev1.EnvVar{Name: "S", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}, Key: "k"}}}
	cases := map[string]struct {
		env, vars, want []corev1.EnvVar
	}{
		"nothing":                           {},
		"append to nothing":                 {vars: []corev1.EnvVar{env("A", "1")}, want: []corev1.EnvVar{env("A", "1")}},
		"no vars keeps env":                 {env: []corev1.EnvVar{env("A", "1")}, want: []corev1.EnvVar{env("A", "1")}},
		"replace in place":                  {env: []corev1.EnvVar{env("A", "1"), env("B", "2"), env("C", "3")}, vars: []corev1.EnvVar{env("B", "20")}, want: []corev1.EnvVar{env("A", "1"), env("B", "20"), env("C", "3")}},
		"append new in order":               {env: []corev1.EnvVar{env("A", "1")}, vars: []corev1.EnvVar{env("C", "3"), env("B", "2")}, want: []corev1.EnvVar{env("A", "1"), env("C", "3"), env("B", "2")}},
		"mixed":                             {env: []corev1.EnvVar{env("A", "1"), env("B", "2")}, vars: []corev1.EnvVar{env("C", "3"), env("A", "10")}, want: []corev1.EnvVar{env("A", "10"), env("B", "2"), env("C", "3")}},
		"valueFrom replaces value entirely": {env: []corev1.EnvVar{env("S", "plain")}, vars: []corev1.EnvVar{secret}, want: []corev1.EnvVar{secret}},
		"value replaces valueFrom entirely": {env: []corev1.EnvVar{secret}, vars: []corev1.EnvVar{env("S", "plain")}, want: []corev1.EnvVar{env("S", "plain")}},
		"the last of duplicate vars wins":   {vars: []corev1.EnvVar{env("A", "1"), env("A", "2")}, want: []corev1.EnvVar{env("A", "2")}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := append([]corev1.EnvVar(nil), tc.env...)
			inBefore := append([]corev1.EnvVar(nil), tc.env...)
			varsBefore := append([]corev1.EnvVar(nil), tc.vars...)
			got := runtime.UpsertEnv(in, tc.vars...)
			if len(got) == 0 {
				got = nil
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("UpsertEnv (-want +got):\n%s", diff)
			}
			for k := range got {
				got[k].Value = "mutated"
				if got[k].ValueFrom != nil && got[k].ValueFrom.SecretKeyRef != nil {
					got[k].ValueFrom.SecretKeyRef.Key = "mutated"
				}
			}
			if diff := cmp.Diff(inBefore, in); diff != "" {
				t.Errorf("input env aliased or modified (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(varsBefore, tc.vars); diff != "" {
				t.Errorf("vars aliased or modified (-before +after):\n%s", diff)
			}
		})
	}
}

func TestUpsertPort(t *testing.T) {
	p := func(name string, n int32) corev1.ContainerPort {
		return corev1.ContainerPort{Name: name, ContainerPort: n}
	}
	cases := map[string]struct {
		ports []corev1.ContainerPort
		add   corev1.ContainerPort
		want  []corev1.ContainerPort
	}{
		"to no ports":      {add: p("a", 29500), want: []corev1.ContainerPort{p("a", 29500)}},
		"appended":         {ports: []corev1.ContainerPort{p("m", 8080)}, add: p("a", 29500), want: []corev1.ContainerPort{p("m", 8080), p("a", 29500)}},
		"same number kept": {ports: []corev1.ContainerPort{p("mine", 29500)}, add: p("a", 29500), want: []corev1.ContainerPort{p("mine", 29500)}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := &corev1.Container{Ports: tc.ports}
			runtime.UpsertPort(c, tc.add)
			if diff := cmp.Diff(tc.want, c.Ports); diff != "" {
				t.Errorf("ports (-want +got):\n%s", diff)
			}
		})
	}
}

// Labels from the runtime template are the starting point of the JobSet's metadata.
func TestNewInfoMetadata(t *testing.T) {
	cases := map[string]struct {
		rt                    *runtime.Runtime
		wantLabels, wantAnnos map[string]string
	}{
		"none": {rt: rtt.MakeTorchRuntime("torch").Obj()},
		"from the template": {
			rt:         rtt.MakeTorchRuntime("torch").Labels(map[string]string{"a": "1"}).Annotations(map[string]string{"b": "2"}).Obj(),
			wantLabels: map[string]string{"a": "1"},
			wantAnnos:  map[string]string{"b": "2"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			info, err := runtime.NewInfo(runtime.TrainJobRequest(rtt.MakeTrainJob("ns", "job").Obj()), tc.rt)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantLabels, info.Labels); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantAnnos, info.Annotations); diff != "" {
				t.Errorf("annotations (-want +got):\n%s", diff)
			}
			if info.Runtime != tc.rt {
				t.Errorf("Info.Runtime is not the runtime given")
			}
		})
	}
}

func TestUpsertVolumesAndMounts(t *testing.T) {
	vols := []corev1.Volume{{Name: "a"}, {Name: "b", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	gotVols := runtime.UpsertVolumes(vols, corev1.Volume{Name: "b"}, corev1.Volume{Name: "c"})
	if diff := cmp.Diff([]corev1.Volume{{Name: "a"}, {Name: "b"}, {Name: "c"}}, gotVols); diff != "" {
		t.Errorf("UpsertVolumes (-want +got):\n%s", diff)
	}
	if vols[1].EmptyDir == nil {
		t.Error("UpsertVolumes modified its input")
	}
	mounts := []corev1.VolumeMount{{Name: "x", MountPath: "/data"}, {Name: "y", MountPath: "/keys"}}
	gotMounts := runtime.UpsertMounts(mounts, corev1.VolumeMount{Name: "z", MountPath: "/keys"}, corev1.VolumeMount{Name: "x", MountPath: "/more"})
	want := []corev1.VolumeMount{{Name: "x", MountPath: "/data"}, {Name: "z", MountPath: "/keys"}, {Name: "x", MountPath: "/more"}}
	if diff := cmp.Diff(want, gotMounts); diff != "" {
		t.Errorf("UpsertMounts (-want +got):\n%s", diff)
	}
	if mounts[1].Name != "y" {
		t.Error("UpsertMounts modified its input")
	}
}

func TestPriorityClassName(t *testing.T) {
	for _, tc := range []struct {
		name     string
		priority map[string]string // by replicated job
		want     string
	}{
		{name: "none"},
		{name: "one job's", priority: map[string]string{"side": "high"}, want: "high"},
		{name: "the last job's in template order", priority: map[string]string{"side": "low", "node": "high"}, want: "high"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := rtt.MakeTorchRuntime("torch").ReplicatedJobs(
				rtt.MakeReplicatedJob("side", "", rtt.MakeContainer("side", "side:latest")),
				rtt.MakeReplicatedJob("node", trainer.AncestorTrainer, rtt.MakeContainer(trainer.NodeContainer, "trainer:latest")),
			)
			for rjob, pc := range tc.priority {
				w.PodSpec(rjob, func(ps *corev1.PodSpec) { ps.PriorityClassName = pc })
			}
			info, err := runtime.NewInfo(runtime.TrainJobRequest(rtt.MakeTrainJob("ns", "job").Obj()), w.Obj())
			if err != nil {
				t.Fatal(err)
			}
			if got := info.PriorityClassName(); got != tc.want {
				t.Errorf("PriorityClassName() = %q, want %q", got, tc.want)
			}
		})
	}
}
