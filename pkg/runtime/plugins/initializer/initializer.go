// Package initializer hands a TrainJob's spec.initializer to the runtime's
// dataset and model initializer jobs: what to fetch (STORAGE_URI), the user's
// env and the credentials secret. The initializers write into the shared
// volume named "initializer"; the runtime's dependsOn makes the trainer wait
// until they are Complete. The jobs run once (replicas 1): the JobSet plugin
// forces that for every job bound to a TrainJob field.
package initializer

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
)

// Name of the plugin.
const Name = "Initializer"

// StorageURIEnv is the variable through which initializers learn what to fetch.
const StorageURIEnv = "STORAGE_URI"

// VolumeName is the volume the initializers write to and the trainer reads
// from; each initializer container must mount it.
const VolumeName = "initializer"

// Where the initializers write inside the containers (the shipped runtimes
// mount the volume at /workspace).
const (
	DatasetMountPath = "/workspace/dataset"
	ModelMountPath   = "/workspace/model"
)

// Initializer is the plugin.
type Initializer struct{}

var (
	_ framework.ValidatePlugin = (*Initializer)(nil)
	_ framework.MLPolicyPlugin = (*Initializer)(nil)
)

// New returns the plugin.
func New() *Initializer { return &Initializer{} }

// Name implements framework.Plugin.
func (*Initializer) Name() string { return Name }

// step is one kind of initializer: its job and container name (the same
// string, also its ancestor label) and the TrainJob's config for it.
type step struct {
	name string
	// config is how upstream's messages name the TrainJob field.
	config string
	uri    *string
	env    []corev1.EnvVar
	secret *corev1.LocalObjectReference
}

func steps(req *runtime.Request) []step {
	ini := req.Initializer
	if ini == nil {
		return nil
	}
	var out []step
	if d := ini.Dataset; d != nil {
		out = append(out, step{name: trainer.AncestorDatasetInitializer, config: "datasetConfig", uri: d.StorageUri, env: d.Env, secret: d.SecretRef})
	}
	if m := ini.Model; m != nil {
		out = append(out, step{name: trainer.AncestorModelInitializer, config: "modelConfig", uri: m.StorageUri, env: m.Env, secret: m.SecretRef})
	}
	return out
}

// Validate checks, for each initializer the TrainJob configures, that the
// runtime has the job of that name, its container of the same name, and that
// container's mount of the shared volume (Kubeflow Trainer's checks and
// messages: it finds the jobs by name, the env builder by ancestor label).
func (*Initializer) Validate(info *runtime.Info, req *runtime.Request) field.ErrorList {
	var errs field.ErrorList
	path := req.Paths.Runtime
	for _, s := range steps(req) {
		ps := info.PodSpec(s.name)
		if ps == nil {
			errs = append(errs, field.Invalid(path, info.Runtime.Name,
				fmt.Sprintf("must have %s job when trainJob is configured with input %s", s.name, s.config)))
			continue
		}
		c := info.Container(s.name, s.name)
		if c == nil {
			errs = append(errs, field.Invalid(path, info.Runtime.Name,
				fmt.Sprintf("must have container with name - %s in the %s job", s.name, s.name)))
			continue
		}
		mounted := false
		for _, vm := range c.VolumeMounts {
			mounted = mounted || vm.Name == VolumeName
		}
		if !mounted {
			errs = append(errs, field.Invalid(path, info.Runtime.Name,
				fmt.Sprintf("must have volumeMount with name - %s in container %s of the %s job", VolumeName, s.name, s.name)))
		}
	}
	return errs
}

// EnforceMLPolicy gives each configured initializer's container (found by
// ancestor label) STORAGE_URI whenever storageUri is set ("" included), then
// the TrainJob's env (which may override it), then an envFrom of the secret.
func (*Initializer) EnforceMLPolicy(info *runtime.Info, req *runtime.Request) error {
	for _, s := range steps(req) {
		c := info.Container(runtime.AncestorJob(&info.Spec, s.name), s.name)
		if c == nil {
			continue
		}
		if s.uri != nil {
			c.Env = runtime.UpsertEnv(c.Env, corev1.EnvVar{Name: StorageURIEnv, Value: *s.uri})
		}
		c.Env = runtime.UpsertEnv(c.Env, s.env...)
		if s.secret != nil {
			c.EnvFrom = append(c.EnvFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: *s.secret}})
		}
	}
	return nil
}
