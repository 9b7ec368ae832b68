package initializer_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/initializer"
	rtt "github.com/trainyard/trainyard/test/util/rtt"
)

var env = rtt.Env

func secretEnvFrom(name string) corev1.EnvFromSource {
	return corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}
}

var mount = corev1.VolumeMount{Name: "initializer", MountPath: "/workspace"}

// mounted is an initializer container that mounts the shared volume.
func mounted(name, image string) corev1.Container {
	c := rtt.MakeContainer(name, image)
	c.VolumeMounts = []corev1.VolumeMount{mount}
	return c
}

// initRuntime has a trainer job and both initializer jobs, as upstream's torchtune runtimes.
func initRuntime() *rtt.RuntimeWrapper {
	return rtt.MakeTorchRuntime("torch").
		ReplicatedJob(
			rtt.MakeReplicatedJob("dataset-initializer", trainer.AncestorDatasetInitializer, mounted("dataset-initializer", "ds:1")),
			rtt.MakeReplicatedJob("model-initializer", trainer.AncestorModelInitializer, mounted("model-initializer", "model:1")),
		)
}

// run is the part of the pipeline this plugin takes part in.
func run(t *testing.T, job *trainer.TrainJob, rt *runtime.Runtime) (*runtime.Info, field.ErrorList) {
	t.Helper()
	info, err := runtime.NewInfo(runtime.TrainJobRequest(job), rt)
	if err != nil {
		t.Fatal(err)
	}
	p := initializer.New()
	if errs := p.Validate(info, runtime.TrainJobRequest(job)); len(errs) > 0 {
		return nil, errs
	}
	if err := p.EnforceMLPolicy(info, runtime.TrainJobRequest(job)); err != nil {
		t.Fatal(err)
	}
	return info, nil
}

func TestEnv(t *testing.T) {
	cases := map[string]struct {
		rt        *runtime.Runtime
		job       *trainer.TrainJob
		wantDS    corev1.Container
		wantModel corev1.Container
	}{
		"no initializer": {
			rt:        initRuntime().Obj(),
			job:       rtt.MakeTrainJob("ns", "job").Obj(),
			wantDS:    mounted("dataset-initializer", "ds:1"),
			wantModel: mounted("model-initializer", "model:1"),
		},
		"dataset: STORAGE_URI, env and secretRef": {
			rt:  initRuntime().Obj(),
			job: rtt.MakeTrainJob("ns", "job").DatasetInitializer("hf://tatsu-lab/alpaca", "hf-token", env("X", "1")).Obj(),
			wantDS: corev1.Container{Name: "dataset-initializer", Image: "ds:1", VolumeMounts: []corev1.VolumeMount{mount},
				Env:     []corev1.EnvVar{env("STORAGE_URI", "hf://tatsu-lab/alpaca"), env("X", "1")},
				EnvFrom: []corev1.EnvFromSource{secretEnvFrom("hf-token")}},
			wantModel: mounted("model-initializer", "model:1"),
		},
		"model: STORAGE_URI, env and secretRef": {
			rt:     initRuntime().Obj(),
			job:    rtt.MakeTrainJob("ns", "job").ModelInitializer("s3://bucket/llama", "aws", env("REGION", "eu")).Obj(),
			wantDS: mounted("dataset-initializer", "ds:1"),
			wantModel: corev1.Container{Name: "model-initializer", Image: "model:1", VolumeMounts: []corev1.VolumeMount{mount},
				Env:     []corev1.EnvVar{env("STORAGE_URI", "s3://bucket/llama"), env("REGION", "eu")},
				EnvFrom: []corev1.EnvFromSource{secretEnvFrom("aws")}},
		},
		"both, over the runtime's defaults; the TrainJob's env may override STORAGE_URI": {
			rt: initRuntime().
				ContainerEnv("dataset-initializer", "dataset-initializer", env("STORAGE_URI", "hf://default"), env("KEEP", "1")).
				PodSpec("model-initializer", func(ps *corev1.PodSpec) {
					ps.Containers[0].EnvFrom = []corev1.EnvFromSource{secretEnvFrom("runtime-secret")}
				}).Obj(),
			job: rtt.MakeTrainJob("ns", "job").
				DatasetInitializer("hf://mine", "", env("KEEP", "2")).
				ModelInitializer("hf://model", "user-secret", env("STORAGE_URI", "hf://from-env")).Obj(),
			wantDS: corev1.Container{Name: "dataset-initializer", Image: "ds:1", VolumeMounts: []corev1.VolumeMount{mount},
				Env: []corev1.EnvVar{env("STORAGE_URI", "hf://mine"), env("KEEP", "2")}},
			wantModel: corev1.Container{Name: "model-initializer", Image: "model:1", VolumeMounts: []corev1.VolumeMount{mount},
				Env:     []corev1.EnvVar{env("STORAGE_URI", "hf://from-env")},
				EnvFrom: []corev1.EnvFromSource{secretEnvFrom("runtime-secret"), secretEnvFrom("user-secret")}},
		},
		"an empty storageUri is set too, as upstream does": {
			rt: initRuntime().
				ContainerEnv("dataset-initializer", "dataset-initializer", env("STORAGE_URI", "hf://default")).Obj(),
			job: rtt.MakeTrainJob("ns", "job").DatasetInitializer("", "").Obj(),
			wantDS: corev1.Container{Name: "dataset-initializer", Image: "ds:1", VolumeMounts: []corev1.VolumeMount{mount},
				Env: []corev1.EnvVar{env("STORAGE_URI", "")}},
			wantModel: mounted("model-initializer", "model:1"),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			info, errs := run(t, tc.job, tc.rt)
			if len(errs) > 0 {
				t.Fatalf("Validate: %v", errs)
			}
			if diff := cmp.Diff(tc.wantDS, *info.Container("dataset-initializer", "dataset-initializer")); diff != "" {
				t.Errorf("dataset-initializer (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantModel, *info.Container("model-initializer", "model-initializer")); diff != "" {
				t.Errorf("model-initializer (-want +got):\n%s", diff)
			}
		})
	}
}

// Validation finds the jobs by name (and says so in upstream's words); the
// env goes to the job with the ancestor label, whatever its name.
func TestValidate(t *testing.T) {
	rtPath := field.NewPath("spec", "runtimeRef")
	noMount := rtt.MakeContainer("dataset-initializer", "ds:1")
	cases := map[string]struct {
		rt   *runtime.Runtime
		job  *trainer.TrainJob
		want field.ErrorList
	}{
		"no initializer on a runtime without initializer jobs": {
			rt:  rtt.MakeTorchRuntime("torch").Obj(),
			job: rtt.MakeTrainJob("ns", "job").Obj(),
		},
		"dataset on a runtime without a dataset-initializer job": {
			rt:   rtt.MakeTorchRuntime("torch").Obj(),
			job:  rtt.MakeTrainJob("ns", "job").DatasetInitializer("hf://x", "").Obj(),
			want: field.ErrorList{field.Invalid(rtPath, "torch", "must have dataset-initializer job when trainJob is configured with input datasetConfig")},
		},
		"a job with the label but another name is not found": {
			rt: rtt.MakeTorchRuntime("torch").ReplicatedJob(
				rtt.MakeReplicatedJob("fetch", trainer.AncestorDatasetInitializer, mounted("dataset-initializer", "ds:1"))).Obj(),
			job:  rtt.MakeTrainJob("ns", "job").DatasetInitializer("hf://x", "").Obj(),
			want: field.ErrorList{field.Invalid(rtPath, "torch", "must have dataset-initializer job when trainJob is configured with input datasetConfig")},
		},
		"model job without its container": {
			rt: rtt.MakeTorchRuntime("torch").ReplicatedJob(
				rtt.MakeReplicatedJob("model-initializer", trainer.AncestorModelInitializer, mounted("init", "model:1"))).Obj(),
			job:  rtt.MakeTrainJob("ns", "job").ModelInitializer("hf://x", "").Obj(),
			want: field.ErrorList{field.Invalid(rtPath, "torch", "must have container with name - model-initializer in the model-initializer job")},
		},
		"dataset container without the initializer mount; model fine": {
			rt:  initRuntime().PodSpec("dataset-initializer", func(ps *corev1.PodSpec) { ps.Containers[0] = noMount }).Obj(),
			job: rtt.MakeTrainJob("ns", "job").DatasetInitializer("hf://x", "").ModelInitializer("hf://y", "").Obj(),
			want: field.ErrorList{field.Invalid(rtPath, "torch",
				"must have volumeMount with name - initializer in container dataset-initializer of the dataset-initializer job")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			info, err := runtime.NewInfo(runtime.TrainJobRequest(tc.job), tc.rt)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, initializer.New().Validate(info, runtime.TrainJobRequest(tc.job))); diff != "" {
				t.Errorf("Validate (-want +got):\n%s", diff)
			}
		})
	}
}

// The env goes to the container of the job labelled as the step, whatever the
// job's name (a runtime may have both a job named dataset-initializer, which
// validation wants, and the label on it).
func TestEnvByLabel(t *testing.T) {
	rt := rtt.MakeTorchRuntime("torch").ReplicatedJob(
		rtt.MakeReplicatedJob("dataset-initializer", "", mounted("dataset-initializer", "ds:1")),
		rtt.MakeReplicatedJob("fetch", trainer.AncestorDatasetInitializer, mounted("dataset-initializer", "ds:1"))).Obj()
	job := rtt.MakeTrainJob("ns", "job").DatasetInitializer("hf://x", "").Obj()
	info, errs := run(t, job, rt)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if diff := cmp.Diff([]corev1.EnvVar{env("STORAGE_URI", "hf://x")}, info.Container("fetch", "dataset-initializer").Env); diff != "" {
		t.Errorf("labelled job's env (-want +got):\n%s", diff)
	}
	if got := info.Container("dataset-initializer", "dataset-initializer").Env; got != nil {
		t.Errorf("unlabelled job got env %v", got)
	}
}
