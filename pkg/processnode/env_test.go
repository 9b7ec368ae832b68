package processnode

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

type fakeSources struct {
	cms     map[string]*corev1.ConfigMap
	secrets map[string]*corev1.Secret
}

func (f fakeSources) ConfigMap(ns, name string) (*corev1.ConfigMap, error) {
	if cm, ok := f.cms[ns+"/"+name]; ok {
		return cm, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}

func (f fakeSources) Secret(ns, name string) (*corev1.Secret, error) {
	if s, ok := f.secrets[ns+"/"+name]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}

func testPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "job-node-0-1-abcde", Namespace: "team", UID: "uid-1",
			Labels:      map[string]string{"app": "train", "tier": "x"},
			Annotations: map[string]string{"batch.kubernetes.io/job-completion-index": "1"},
		},
		Spec: corev1.PodSpec{NodeName: "process-node-0", Hostname: "job-node-0-1", Subdomain: "job", ServiceAccountName: "sa"},
	}
}

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
}

func TestContainerEnv(t *testing.T) {
	pod := testPod()
	yes := true
	src := fakeSources{
		cms:     map[string]*corev1.ConfigMap{"team/cfg": {Data: map[string]string{"LR": "0.05", "B": "32"}}},
		secrets: map[string]*corev1.Secret{"team/sec": {Data: map[string][]byte{"TOKEN": []byte("s3cret")}}},
	}
	c := &corev1.Container{
		Name: "node",
		EnvFrom: []corev1.EnvFromSource{
			{Prefix: "CFG_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}},
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}, Optional: &yes}},
		},
		Env: []corev1.EnvVar{
			fieldEnv("PET_NODE_RANK", "metadata.annotations['batch.kubernetes.io/job-completion-index']"),
			fieldEnv("POD_NAME", "metadata.name"),
			fieldEnv("POD_NS", "metadata.namespace"),
			fieldEnv("POD_UID", "metadata.uid"),
			fieldEnv("APP", "metadata.labels['app']"),
			fieldEnv("MISSING", "metadata.labels['nope']"),
			fieldEnv("NODE", "spec.nodeName"),
			fieldEnv("SA", "spec.serviceAccountName"),
			fieldEnv("POD_IP", "status.podIP"),
			fieldEnv("HOST_IP", "status.hostIP"),
			{Name: "LR", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "LR"}}},
			{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}, Key: "TOKEN"}}},
			{Name: "OPT", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}, Key: "nope", Optional: &yes}}},
			{Name: "ADDR", Value: "$(POD_IP):29500"},
			{Name: "LITERAL", Value: "$$(POD_IP) $(UNDEFINED)"},
			{Name: "PATH", Value: "/opt/bin:$(PATH)"},
			{Name: "CPU", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}},
		},
	}
	ref := PodRef{Pod: pod, PodIP: "10.254.0.7", HostIP: "127.0.0.1", NodeAllocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}
	env, err := ContainerEnv(ref, c, src)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"PATH=/opt/bin:" + DefaultPath,
		"HOSTNAME=job-node-0-1",
		"CFG_B=32", "CFG_LR=0.05",
		"PET_NODE_RANK=1", "POD_NAME=job-node-0-1-abcde", "POD_NS=team", "POD_UID=uid-1",
		"APP=train", "MISSING=", "NODE=process-node-0", "SA=sa",
		"POD_IP=10.254.0.7", "HOST_IP=127.0.0.1", "LR=0.05", "TOKEN=s3cret",
		"ADDR=10.254.0.7:29500", "LITERAL=$(POD_IP) $(UNDEFINED)", "CPU=2",
	}
	if d := cmp.Diff(want, env); d != "" {
		t.Errorf("env (-want +got):\n%s", d)
	}
}

func TestContainerEnvMissingReferences(t *testing.T) {
	pod := testPod()
	for name, c := range map[string]*corev1.Container{
		"configmap": {Env: []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}, Key: "k"}}}}},
		"key":       {Env: []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "nope"}}}}},
		"secret":    {EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}}}}},
	} {
		t.Run(name, func(t *testing.T) {
			src := fakeSources{cms: map[string]*corev1.ConfigMap{"team/cfg": {Data: map[string]string{"k": "v"}}}}
			_, err := ContainerEnv(PodRef{Pod: pod}, c, src)
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("got %v, want a ConfigError (CreateContainerConfigError)", err)
			}
		})
	}
	_, err := ContainerEnv(PodRef{Pod: pod}, &corev1.Container{Env: []corev1.EnvVar{fieldEnv("X", "spec.bogus")}}, fakeSources{})
	if err == nil || !strings.Contains(err.Error(), "unsupported fieldPath") {
		t.Errorf("unsupported field path: got %v", err)
	}
}

func TestFieldValueMaps(t *testing.T) {
	v, err := FieldValue(PodRef{Pod: testPod()}, "metadata.labels")
	if err != nil {
		t.Fatal(err)
	}
	if want := "app=\"train\"\ntier=\"x\""; v != want {
		t.Errorf("labels = %q, want %q", v, want)
	}
	v, _ = FieldValue(PodRef{Pod: testPod()}, `metadata.annotations["batch.kubernetes.io/job-completion-index"]`)
	if v != "1" {
		t.Errorf("double-quoted subscript = %q", v)
	}
}

func TestResourceValue(t *testing.T) {
	c := &corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
	}}
	ref := PodRef{Pod: testPod(), NodeAllocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}
	for _, tc := range []struct {
		res, divisor, want string
	}{
		{"requests.cpu", "", "1"}, // rounded up
		{"requests.cpu", "1m", "500"},
		{"limits.cpu", "", "4"}, // node allocatable
		{"requests.memory", "1Mi", "1024"},
		{"limits.memory", "1Gi", "2"},
	} {
		sel := &corev1.ResourceFieldSelector{Resource: tc.res}
		if tc.divisor != "" {
			sel.Divisor = resource.MustParse(tc.divisor)
		}
		got, err := ResourceValue(ref, c, sel)
		if err != nil || got != tc.want {
			t.Errorf("%s/%s = %q, %v; want %q", tc.res, tc.divisor, got, err, tc.want)
		}
	}
}

func TestExpand(t *testing.T) {
	lookup := EnvLookup([]string{"A=1", "B=two", "EMPTY="})
	for in, want := range map[string]string{
		"plain":          "plain",
		"$(A)":           "1",
		"x$(A)y$(B)z":    "x1ytwoz",
		"$(EMPTY)|":      "|",
		"$(NOPE)":        "$(NOPE)",
		"$$(A)":          "$(A)",
		"$$":             "$",
		"cost $5":        "cost $5",
		"$(A":            "$(A",
		"trailing $":     "trailing $",
		"$(A)$(A)$$(B)$": "11$(B)$",
	} {
		if got := Expand(in, lookup); got != want {
			t.Errorf("Expand(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCommandLine(t *testing.T) {
	c := &corev1.Container{Name: "node", Command: []string{"torchrun", "$(SCRIPT)"}, Args: []string{"--lr=$(LR)", "$$(LR)"}}
	argv, err := CommandLine(c, []string{"SCRIPT=/opt/mnist/mnist.py", "LR=0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"torchrun", "/opt/mnist/mnist.py", "--lr=0.1", "$(LR)"}, argv); d != "" {
		t.Error(d)
	}
	if _, err := CommandLine(&corev1.Container{Name: "x", Image: "busybox"}, nil); err == nil {
		t.Error("a container without a command must be refused: the image's entrypoint is unknown here")
	}
}

func TestPodHostname(t *testing.T) {
	p := testPod()
	if h := PodHostname(p); h != "job-node-0-1" {
		t.Errorf("hostname = %q", h)
	}
	p.Spec.Hostname = ""
	if h := PodHostname(p); h != p.Name {
		t.Errorf("hostname without spec.hostname = %q", h)
	}
	p.Name = strings.Repeat("a", 62) + "-b"
	if h := PodHostname(p); h != strings.Repeat("a", 62) {
		t.Errorf("long hostname = %q", h)
	}
}
