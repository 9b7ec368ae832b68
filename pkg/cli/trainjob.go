package cli

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// QueueLabel puts a TrainJob in a Kueue LocalQueue.
const QueueLabel = "kueue.x-k8s.io/queue-name"

// TrainOptions describe the TrainJob that `trainyard train` creates.
type TrainOptions struct {
	Name      string
	Namespace string
	Runtime   Runtime
	// NumNodes is spec.trainer.numNodes; 0 keeps the runtime's.
	NumNodes  int32
	Resources corev1.ResourceList
	Env       []corev1.EnvVar
	Queue     string
	Image     string
	// Command is the trainer's command; nil keeps the runtime's.
	Command []string
	// ActiveDeadlineSeconds is spec.activeDeadlineSeconds (the Kubeflow SDK
	// 0.5's ActiveDeadlineSeconds option); 0 sets none.
	ActiveDeadlineSeconds int64
}

// NewTrainJob builds the TrainJob as the SDK's train() does: runtimeRef by name
// (with the kind when the runtime is namespaced), and spec.trainer only with what
// was asked for; resources are both requests and limits.
func NewTrainJob(o TrainOptions) *trainer.TrainJob {
	job := &trainer.TrainJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind},
		ObjectMeta: metav1.ObjectMeta{Name: o.Name, Namespace: o.Namespace},
		Spec:       trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: o.Runtime.Name}},
	}
	if o.Runtime.Kind == trainer.TrainingRuntimeKind {
		job.Spec.RuntimeRef.APIGroup = ptr.To(trainer.GroupVersion.Group)
		job.Spec.RuntimeRef.Kind = ptr.To(trainer.TrainingRuntimeKind)
	}
	if o.Queue != "" {
		job.Labels = map[string]string{QueueLabel: o.Queue}
	}
	if o.ActiveDeadlineSeconds > 0 {
		job.Spec.ActiveDeadlineSeconds = ptr.To(o.ActiveDeadlineSeconds)
	}
	t := trainer.Trainer{Command: o.Command, Env: o.Env}
	if o.NumNodes > 0 {
		t.NumNodes = ptr.To(o.NumNodes)
	}
	if o.Image != "" {
		t.Image = ptr.To(o.Image)
	}
	if len(o.Resources) > 0 {
		t.ResourcesPerNode = &corev1.ResourceRequirements{Requests: o.Resources.DeepCopy(), Limits: o.Resources.DeepCopy()}
	}
	if t.NumNodes != nil || t.Image != nil || t.ResourcesPerNode != nil || len(t.Command) > 0 || len(t.Env) > 0 {
		job.Spec.Trainer = &t
	}
	return job
}

// RandomName is a name like the SDK's: a lowercase letter and 11 hex digits.
func RandomName() (string, error) {
	b := make([]byte, 7)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating a TrainJob name: %w", err)
	}
	first := "abcdefghijklmnopqrstuvwxyz"[int(b[0])%26]
	return string(first) + hex.EncodeToString(b[1:])[:11], nil
}

// ParseResources reads --resources, e.g. "cpu=2,memory=4Gi,gpu=1", as the SDK
// reads resources_per_node: names are lower-cased, "gpu" is nvidia.com/gpu,
// "storage" is ephemeral-storage and "mig-<profile>" is nvidia.com/mig-<profile>;
// other names (amd.com/gpu, …) are taken as they are. GPUs and MIG slices cannot
// be mixed.
func ParseResources(s string) (corev1.ResourceList, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	out := corev1.ResourceList{}
	for _, item := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(item), "=")
		k = strings.ToLower(strings.TrimSpace(k))
		if !ok || k == "" || strings.TrimSpace(v) == "" {
			return nil, fmt.Errorf("resource %q: want NAME=QUANTITY, e.g. cpu=2,memory=4Gi,gpu=1", item)
		}
		name := resourceName(k)
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("resource %s given twice", name)
		}
		q, err := resource.ParseQuantity(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("resource %s: quantity %q: %w", k, v, err)
		}
		out[name] = q
	}
	var mig []string
	for name := range out {
		if strings.HasPrefix(string(name), MIGPrefix) {
			mig = append(mig, string(name))
		}
	}
	if _, gpu := out[GPUResource]; gpu && len(mig) > 0 {
		sort.Strings(mig)
		return nil, fmt.Errorf("resources %s and %s: GPUs and MIG slices cannot be mixed", GPUResource, strings.Join(mig, ", "))
	}
	return out, nil
}

func resourceName(k string) corev1.ResourceName {
	switch {
	case k == "gpu":
		return GPUResource
	case k == "storage":
		return EphemeralVolume
	case strings.HasPrefix(k, "mig-"):
		return corev1.ResourceName("nvidia.com/" + k)
	}
	return corev1.ResourceName(k)
}

// ParseEnv reads --env NAME=VALUE flags in order; a later value of a name
// replaces the earlier one in place.
func ParseEnv(pairs []string) ([]corev1.EnvVar, error) {
	var env []corev1.EnvVar
	at := map[string]int{}
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--env %q: want NAME=VALUE", p)
		}
		if i, seen := at[k]; seen {
			env[i].Value = v
			continue
		}
		at[k] = len(env)
		env = append(env, corev1.EnvVar{Name: k, Value: v})
	}
	return env, nil
}
