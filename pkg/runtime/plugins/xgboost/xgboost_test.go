package xgboost_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/plugins"
	rtt "github.com/trainyard/trainyard/test/util/rtt"
)

func xgbRuntime() *rtt.RuntimeWrapper {
	return rtt.MakeRuntime(trainer.ClusterTrainingRuntimeKind, "xgboost-distributed").MLPolicy(&trainer.MLPolicy{
		NumNodes: ptr.To[int32](1), MLPolicySource: trainer.MLPolicySource{XGBoost: &trainer.XGBoostMLPolicySource{}},
	})
}

var taskID = corev1.EnvVar{Name: "DMLC_TASK_ID", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
	FieldPath: "metadata.annotations['batch.kubernetes.io/job-completion-index']",
}}}

func dmlc(uri, workers string) []corev1.EnvVar {
	return []corev1.EnvVar{rtt.Env("DMLC_TRACKER_URI", uri), rtt.Env("DMLC_TRACKER_PORT", "29500"), taskID, rtt.Env("DMLC_NUM_WORKER", workers)}
}

var port = []corev1.ContainerPort{{ContainerPort: 29500, Protocol: corev1.ProtocolTCP}}

func TestXGBoost(t *testing.T) {
	cases := map[string]struct {
		job       *trainer.TrainJob
		rt        *runtime.Runtime
		wantEnv   []corev1.EnvVar
		wantPorts []corev1.ContainerPort
		wantNodes int32
	}{
		"no trainer block: the runtime runs as written": {
			job:       rtt.MakeTrainJob("ns", "job").Obj(),
			rt:        xgbRuntime().Obj(),
			wantNodes: 1,
		},
		"CPU nodes: one worker per pod, the tracker on pod 0 without a port": {
			job:       rtt.MakeTrainJob("ns", "job").NumNodes(2).Env(rtt.Env("OMP_NUM_THREADS", "1")).Obj(),
			rt:        xgbRuntime().Obj(),
			wantEnv:   append([]corev1.EnvVar{rtt.Env("OMP_NUM_THREADS", "1")}, dmlc("job-node-0-0.job", "2")...),
			wantPorts: port,
			wantNodes: 2,
		},
		"GPU nodes: one worker per GPU": {
			job:       rtt.MakeTrainJob("ns", "job").NumNodes(3).ResourcesPerNode(rtt.Limits("nvidia.com/gpu", "4")).Obj(),
			rt:        xgbRuntime().Obj(),
			wantEnv:   dmlc("job-node-0-0.job", "12"),
			wantPorts: port,
			wantNodes: 3,
		},
		"GPUs declared by the runtime count too": {
			job:       rtt.MakeTrainJob("ns", "job").Trainer().Obj(),
			rt:        xgbRuntime().NumNodes(2).TrainerResources(rtt.Limits("amd.com/gpu", "2")).Obj(),
			wantEnv:   dmlc("job-node-0-0.job", "4"),
			wantPorts: port,
			wantNodes: 2,
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
				t.Fatalf("Build: %v", err)
			}
			js := p.JobSet()
			c := runtime.TrainerContainer(&js.Spec)
			if diff := cmp.Diff(tc.wantEnv, c.Env); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantPorts, c.Ports); diff != "" {
				t.Errorf("ports (-want +got):\n%s", diff)
			}
			if got := ptr.Deref(runtime.TrainerJob(&js.Spec).Template.Spec.Parallelism, 0); got != tc.wantNodes {
				t.Errorf("parallelism = %d, want %d", got, tc.wantNodes)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	fw, err := plugins.NewFramework()
	if err != nil {
		t.Fatal(err)
	}
	job := rtt.MakeTrainJob("ns", "job").Env(
		rtt.Env("DMLC_TRACKER_URI", "x"), rtt.Env("OK", "1"), rtt.Env("DMLC_TRACKER_PORT", "1"),
		rtt.Env("DMLC_TASK_ID", "0"), rtt.Env("DMLC_NUM_WORKER", "2"),
	).Obj()
	want := field.ErrorList{
		field.Forbidden(field.NewPath("spec", "trainer", "env").Index(0), "DMLC_TRACKER_URI is reserved for the XGBoost runtime"),
		field.Forbidden(field.NewPath("spec", "trainer", "env").Index(2), "DMLC_TRACKER_PORT is reserved for the XGBoost runtime"),
		field.Forbidden(field.NewPath("spec", "trainer", "env").Index(3), "DMLC_TASK_ID is reserved for the XGBoost runtime"),
		field.Forbidden(field.NewPath("spec", "trainer", "env").Index(4), "DMLC_NUM_WORKER is reserved for the XGBoost runtime"),
	}
	if diff := cmp.Diff(want, fw.Validate(xgbRuntime().Obj(), runtime.TrainJobRequest(job))); diff != "" {
		t.Errorf("Validate (-want +got):\n%s", diff)
	}
	// The same names are free on other runtimes, and the build reports the errors too.
	if errs := fw.Validate(rtt.MakeRuntime(trainer.ClusterTrainingRuntimeKind, "plain").Obj(), runtime.TrainJobRequest(job)); len(errs) != 0 {
		t.Errorf("plain runtime: %v", errs)
	}
	if _, err := fw.Build(runtime.TrainJobRequest(job), xgbRuntime().Obj()); len(rtt.FieldErrsOf(err)) != 4 {
		t.Errorf("Build error = %v, want the 4 reserved-name errors", err)
	}
}
