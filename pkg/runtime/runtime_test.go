package runtime_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
	rtt "github.com/trainyard/trainyard/test/util/rtt"
)

func TestRefKind(t *testing.T) {
	cases := map[string]struct {
		ref     trainer.RuntimeRef
		want    string
		wantErr bool
	}{
		"defaults: ClusterTrainingRuntime in trainer.kubeflow.org": {
			ref:  trainer.RuntimeRef{Name: "torch"},
			want: "ClusterTrainingRuntime",
		},
		"explicit defaults": {
			ref:  trainer.RuntimeRef{Name: "torch", APIGroup: ptr.To("trainer.kubeflow.org"), Kind: ptr.To("ClusterTrainingRuntime")},
			want: "ClusterTrainingRuntime",
		},
		"TrainingRuntime with the default group": {
			ref:  trainer.RuntimeRef{Name: "torch", Kind: ptr.To("TrainingRuntime")},
			want: "TrainingRuntime",
		},
		"TrainingRuntime with an explicit group": {
			ref:  trainer.RuntimeRef{Name: "torch", APIGroup: ptr.To("trainer.kubeflow.org"), Kind: ptr.To("TrainingRuntime")},
			want: "TrainingRuntime",
		},
		"another kind": {
			ref:     trainer.RuntimeRef{Name: "torch", Kind: ptr.To("TrainJob")},
			wantErr: true,
		},
		"kind is case-sensitive": {
			ref:     trainer.RuntimeRef{Name: "torch", Kind: ptr.To("trainingruntime")},
			wantErr: true,
		},
		"another group": {
			ref:     trainer.RuntimeRef{Name: "torch", APIGroup: ptr.To("kubeflow.org")},
			wantErr: true,
		},
		"an empty group is not the default": {
			ref:     trainer.RuntimeRef{Name: "torch", APIGroup: ptr.To("")},
			wantErr: true,
		},
		"an empty kind is not the default": {
			ref:     trainer.RuntimeRef{Name: "torch", Kind: ptr.To("")},
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := runtime.RefKind(tc.ref)
			if (err != nil) != tc.wantErr {
				t.Fatalf("RefKind error = %v, wantErr %v", err, tc.wantErr)
			}
			if err != nil {
				for _, s := range []string{"ClusterTrainingRuntime", "TrainingRuntime", "trainer.kubeflow.org"} {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not mention %q", err, s)
					}
				}
				if got != "" {
					t.Errorf("RefKind = %q with an error, want \"\"", got)
				}
				return
			}
			if got != tc.want {
				t.Errorf("RefKind = %q, want %q", got, tc.want)
			}
		})
	}
}

func fullRuntime() *runtime.Runtime {
	rt := rtt.MakeTorchRuntime("torch-distributed").
		UID("3f1c9a2e-0000-4000-8000-000000000001", 7).
		Labels(map[string]string{"trainer.kubeflow.org/framework": "torch"}).
		Annotations(map[string]string{"note": "x"}).
		TorchNumProcPerNode(intstr.FromString("auto")).
		TrainerResources(corev1.ResourceRequirements{
			Requests: rtt.ResourceList("cpu", "2500m", "memory", "16Gi"),
			Limits:   rtt.ResourceList("nvidia.com/gpu", "4", "memory", "16Gi"),
		}).
		ContainerEnv("node", "node", rtt.Env("A", "1"), corev1.EnvVar{Name: "POD", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}).
		ReplicatedJob(rtt.MakeReplicatedJob("dataset-initializer", "dataset-initializer", rtt.MakeContainer("dataset-initializer", "init:1"))).
		Obj()
	rt.Spec.PodGroupPolicy = &trainer.PodGroupPolicy{PodGroupPolicySource: trainer.PodGroupPolicySource{
		Coscheduling: &trainer.CoschedulingPodGroupPolicySource{ScheduleTimeoutSeconds: ptr.To[int32](60)}}}
	rt.Spec.Template.Spec.FailurePolicy = &jobsetv1alpha2.FailurePolicy{MaxRestarts: 2}
	return rt
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	cases := map[string]*runtime.Runtime{
		"minimal": rtt.MakeRuntime(trainer.TrainingRuntimeKind, "plain").Obj(),
		"full":    fullRuntime(),
		"shipped torch-distributed": func() *runtime.Runtime {
			rt, err := rtt.TorchDistributedRuntime()
			if err != nil {
				t.Fatalf("loading runtimes/torch-distributed.yaml: %v", err)
			}
			return rt
		}(),
	}
	for name, rt := range cases {
		t.Run(name, func(t *testing.T) {
			before := rt.Spec.DeepCopy()
			s, err := rt.Encode()
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			got, err := runtime.DecodeRuntime(s)
			if err != nil {
				t.Fatalf("DecodeRuntime(%s): %v", s, err)
			}
			if diff := cmp.Diff(rt, got); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, &rt.Spec); diff != "" {
				t.Errorf("Encode changed the runtime (-before +after):\n%s", diff)
			}
			// Encoding is stable: the snapshot is compared as a string.
			s2, err := got.Encode()
			if err != nil {
				t.Fatal(err)
			}
			if s != s2 {
				t.Errorf("re-encoding differs:\n%s\n%s", s, s2)
			}
		})
	}
}

func TestDecodeRuntimeErrors(t *testing.T) {
	cases := map[string]string{
		"empty":        "",
		"not JSON":     "kind: TrainingRuntime",
		"wrong type":   `{"kind": 3, "name": "x"}`,
		"missing kind": `{"name": "x", "spec": {}}`,
		"missing name": `{"kind": "TrainingRuntime", "spec": {}}`,
		"null":         "null",
	}
	for name, s := range cases {
		t.Run(name, func(t *testing.T) {
			rt, err := runtime.DecodeRuntime(s)
			if err == nil {
				t.Fatalf("DecodeRuntime(%q) = %+v, want an error", s, rt)
			}
			if !strings.Contains(err.Error(), "decoding runtime snapshot") {
				t.Errorf("error %q lacks context", err)
			}
		})
	}
}

func TestFromRuntimeObjects(t *testing.T) {
	spec := fullRuntime().Spec
	meta := metav1.ObjectMeta{Name: "torch", Namespace: "ns", UID: "uid-1", Generation: 4}
	cases := map[string]struct {
		from func() (*runtime.Runtime, *trainer.TrainingRuntimeSpec)
		want *runtime.Runtime
	}{
		"TrainingRuntime": {
			from: func() (*runtime.Runtime, *trainer.TrainingRuntimeSpec) {
				obj := &trainer.TrainingRuntime{ObjectMeta: meta, Spec: *spec.DeepCopy()}
				return runtime.FromTrainingRuntime(obj), &obj.Spec
			},
			want: &runtime.Runtime{Kind: "TrainingRuntime", Name: "torch", UID: "uid-1", Generation: 4, Spec: spec},
		},
		"ClusterTrainingRuntime": {
			from: func() (*runtime.Runtime, *trainer.TrainingRuntimeSpec) {
				obj := &trainer.ClusterTrainingRuntime{ObjectMeta: meta, Spec: *spec.DeepCopy()}
				return runtime.FromClusterTrainingRuntime(obj), &obj.Spec
			},
			want: &runtime.Runtime{Kind: "ClusterTrainingRuntime", Name: "torch", UID: "uid-1", Generation: 4, Spec: spec},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, objSpec := tc.from()
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("runtime (-want +got):\n%s", diff)
			}
			// The snapshot is a copy: editing the object does not change it.
			objSpec.Template.Labels["trainer.kubeflow.org/framework"] = "changed"
			objSpec.Template.Spec.ReplicatedJobs[0].Name = "changed"
			objSpec.MLPolicy.NumNodes = ptr.To[int32](99)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("runtime aliases the object (-want +got):\n%s", diff)
			}
		})
	}
}

// The shipped runtime and its Go twin in test/util/rtt must not drift.
func TestShippedTorchDistributedRuntime(t *testing.T) {
	got, err := rtt.TorchDistributedRuntime()
	if err != nil {
		t.Fatalf("loading runtimes/torch-distributed.yaml: %v", err)
	}
	want := rtt.MakeTorchRuntime("torch-distributed").
		Labels(map[string]string{"trainer.kubeflow.org/framework": "torch"}).Obj()
	// The framework label is on the runtime object, not on its JobSet template.
	want.Spec.Template.Labels = nil
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("runtimes/torch-distributed.yaml (-MakeTorchRuntime +file):\n%s", diff)
	}
}
