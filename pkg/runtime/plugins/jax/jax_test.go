package jax_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/plugins"
	rtt "github.com/trainyard/trainyard/test/util/rtt"
)

func jaxRuntime() *rtt.RuntimeWrapper {
	return rtt.MakeRuntime(trainer.ClusterTrainingRuntimeKind, "jax-distributed").MLPolicy(&trainer.MLPolicy{
		NumNodes: ptr.To[int32](1), MLPolicySource: trainer.MLPolicySource{JAX: &trainer.JAXMLPolicySource{}},
	})
}

var processID = corev1.EnvVar{Name: "JAX_PROCESS_ID", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
	FieldPath: "metadata.annotations['batch.kubernetes.io/job-completion-index']",
}}}

var port = []corev1.ContainerPort{{ContainerPort: 29500, Protocol: corev1.ProtocolTCP}}

// TestJAX builds whole plans and compares the trainer container's env and ports.
func TestJAX(t *testing.T) {
	cases := map[string]struct {
		job       *trainer.TrainJob
		rt        *runtime.Runtime
		wantEnv   []corev1.EnvVar
		wantPorts []corev1.ContainerPort
		wantNodes int32
	}{
		"no trainer block: the runtime runs as written": {
			job:       rtt.MakeTrainJob("ns", "job").Obj(),
			rt:        jaxRuntime().Obj(),
			wantNodes: 1,
		},
		"one process per pod, the coordinator on pod 0": {
			job: rtt.MakeTrainJob("ns", "job").NumNodes(3).Obj(),
			rt:  jaxRuntime().Obj(),
			wantEnv: []corev1.EnvVar{
				rtt.Env("JAX_NUM_PROCESSES", "3"), processID, rtt.Env("JAX_COORDINATOR_ADDRESS", "job-node-0-0.job:29500"),
			},
			wantPorts: port,
			wantNodes: 3,
		},
		"GPUs do not change the process count": {
			job: rtt.MakeTrainJob("ns", "job").NumNodes(2).ResourcesPerNode(rtt.Limits("nvidia.com/gpu", "4")).Obj(),
			rt:  jaxRuntime().Obj(),
			wantEnv: []corev1.EnvVar{
				rtt.Env("JAX_NUM_PROCESSES", "2"), processID, rtt.Env("JAX_COORDINATOR_ADDRESS", "job-node-0-0.job:29500"),
			},
			wantPorts: port,
			wantNodes: 2,
		},
		"the user's JAX values win, runtime env is kept": {
			job: rtt.MakeTrainJob("ns", "job").Env(rtt.Env("JAX_COORDINATOR_ADDRESS", "elsewhere:1234"), rtt.Env("JAX_NUM_PROCESSES", "9")).Obj(),
			rt:  jaxRuntime().NumNodes(2).ContainerEnv("node", "node", rtt.Env("XLA_FLAGS", "--foo")).Obj(),
			wantEnv: []corev1.EnvVar{
				rtt.Env("XLA_FLAGS", "--foo"), rtt.Env("JAX_COORDINATOR_ADDRESS", "elsewhere:1234"), rtt.Env("JAX_NUM_PROCESSES", "9"), processID,
			},
			wantPorts: port,
			wantNodes: 2,
		},
		"the coordinator follows the runtime's subdomain (the headless Service)": {
			job: rtt.MakeTrainJob("ns", "job").Trainer().Obj(),
			rt:  jaxRuntime().Subdomain("net").Obj(),
			wantEnv: []corev1.EnvVar{
				rtt.Env("JAX_NUM_PROCESSES", "1"), processID, rtt.Env("JAX_COORDINATOR_ADDRESS", "job-node-0-0.net:29500"),
			},
			wantPorts: port,
			wantNodes: 1,
		},
		"a torch runtime gets no JAX env": {
			job:       rtt.MakeTrainJob("ns", "job").Trainer().Env(rtt.Env("A", "b")).Obj(),
			rt:        rtt.MakeTorchRuntime("torch").Obj(),
			wantNodes: 1,
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
			if tc.rt.Spec.MLPolicy.Torch != nil {
				for _, e := range c.Env {
					if len(e.Name) > 4 && e.Name[:4] == "JAX_" {
						t.Errorf("torch runtime got %s", e.Name)
					}
				}
				return
			}
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
