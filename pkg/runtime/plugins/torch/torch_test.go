package torch_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
	"github.com/trainyard/trainyard/pkg/runtime/plugins"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/torch"
	rtt "github.com/trainyard/trainyard/test/util/rtt"
)

func env(name, value string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: value} }

func rankEnv() corev1.EnvVar {
	return corev1.EnvVar{Name: "PET_NODE_RANK", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
		FieldPath: "metadata.annotations['batch.kubernetes.io/job-completion-index']",
	}}}
}

// staticEnv is what every node container of a non-elastic torch job gets.
func staticEnv(nnodes, nproc, master string) []corev1.EnvVar {
	return []corev1.EnvVar{
		env("PET_NNODES", nnodes),
		env("PET_NPROC_PER_NODE", nproc),
		rankEnv(),
		env("PET_MASTER_ADDR", master),
		env("PET_MASTER_PORT", "29500"),
	}
}

var torchPort = []corev1.ContainerPort{{ContainerPort: 29500, Protocol: corev1.ProtocolTCP}}

func TestConstants(t *testing.T) {
	// These names are read by torchrun and by users' scripts; they are public.
	got := []string{torch.EnvNumNodes, torch.EnvNumProcPerNode, torch.EnvNodeRank, torch.EnvMasterAddr, torch.EnvMasterPort,
		torch.EnvRdzvBackend, torch.EnvRdzvEndpoint, torch.EnvRdzvID, torch.EnvMaxRestarts, torch.CompletionIndexAnnotation,
		fmt.Sprint(trainer.ContainerTrainerPort)}
	want := []string{"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT",
		"PET_RDZV_BACKEND", "PET_RDZV_ENDPOINT", "PET_RDZV_ID", "PET_MAX_RESTARTS", "batch.kubernetes.io/job-completion-index",
		"29500"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("constants (-want +got):\n%s", diff)
	}
	if torch.New().Name() != "Torch" {
		t.Errorf("Name() = %q, want Torch", torch.New().Name())
	}
}

func TestEnforceMLPolicy(t *testing.T) {
	sidecarRuntime := func() *rtt.RuntimeWrapper {
		return rtt.MakeTorchRuntime("torch").
			Container("node", rtt.MakeContainer("sidecar", "sidecar:1")).
			ReplicatedJob(rtt.MakeReplicatedJob("launcher", "", rtt.MakeContainer("agent", "agent:1")))
	}
	cases := map[string]struct {
		// plugin defaults to torch.New() (cluster.local).
		plugin  *torch.Torch
		job     *trainer.TrainJob
		rt      *runtime.Runtime
		wantEnv []corev1.EnvVar
		// wantInjected maps "job/container" to the env it must end with.
		wantInjected map[string][]corev1.EnvVar
		wantPorts    []corev1.ContainerPort
		wantNodes    int32
		wantErr      []rtt.FieldErr
	}{
		"runtime defaults: one node, auto with no resources is one process": {
			job:       rtt.MakeTrainJob("ns", "job").Obj(),
			rt:        rtt.MakeTorchRuntime("torch").Obj(),
			wantEnv:   staticEnv("1", "1", "job-node-0-0.job"),
			wantPorts: torchPort,
			wantNodes: 1,
		},
		"trainer numNodes overrides the runtime's": {
			job:       rtt.MakeTrainJob("ns", "job").NumNodes(4).Obj(),
			rt:        rtt.MakeTorchRuntime("torch").NumNodes(2).Obj(),
			wantEnv:   staticEnv("4", "1", "job-node-0-0.job"),
			wantPorts: torchPort,
			wantNodes: 4,
		},
		"runtime numNodes when the trainer sets none": {
			job:       rtt.MakeTrainJob("ns", "job").Obj(),
			rt:        rtt.MakeTorchRuntime("torch").NumNodes(3).Obj(),
			wantEnv:   staticEnv("3", "1", "job-node-0-0.job"),
			wantPorts: torchPort,
			wantNodes: 3,
		},
		"master address uses the runtime's subdomain": {
			job:       rtt.MakeTrainJob("ns", "llama").NumNodes(2).Obj(),
			rt:        rtt.MakeTorchRuntime("torch").Subdomain("train-net").Obj(),
			wantEnv:   staticEnv("2", "1", "llama-node-0-0.train-net"),
			wantPorts: torchPort,
			wantNodes: 2,
		},
		"master address uses the trainer job's name": {
			job: rtt.MakeTrainJob("ns", "job").Obj(),
			rt: rtt.MakeTorchRuntime("torch").ReplicatedJobs(
				rtt.MakeReplicatedJob("init", "dataset-initializer", rtt.MakeContainer("dataset-initializer", "init:1")),
				rtt.MakeReplicatedJob("trainer-node", "trainer", rtt.MakeContainer("node", "torch:1")),
			).Obj(),
			wantEnv:   staticEnv("1", "1", "job-trainer-node-0-0.job"),
			wantPorts: torchPort,
			wantNodes: 1,
		},
		"user and runtime variables are kept, a stale PET variable of the runtime is replaced in place": {
			job: rtt.MakeTrainJob("ns", "job").Env(env("PET_REDIRECTS", "3"), env("FOO", "user")).Obj(),
			rt: rtt.MakeTorchRuntime("torch").
				ContainerEnv("node", "node", env("FOO", "runtime"), env("PET_NNODES", "99"), env("BAR", "runtime")).Obj(),
			wantEnv: append([]corev1.EnvVar{
				env("FOO", "user"), env("PET_NNODES", "1"), env("BAR", "runtime"), env("PET_REDIRECTS", "3"),
			}, staticEnv("1", "1", "job-node-0-0.job")[1:]...),
			wantPorts: torchPort,
			wantNodes: 1,
		},
		"an existing 29500 port is not duplicated, other ports are kept": {
			job: rtt.MakeTrainJob("ns", "job").Obj(),
			rt: rtt.MakeTorchRuntime("torch").PodSpec("node", func(ps *corev1.PodSpec) {
				ps.Containers[0].Ports = []corev1.ContainerPort{{Name: "metrics", ContainerPort: 8080}, {Name: "master", ContainerPort: 29500}}
			}).Obj(),
			wantEnv:   staticEnv("1", "1", "job-node-0-0.job"),
			wantPorts: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 8080}, {Name: "master", ContainerPort: 29500}},
			wantNodes: 1,
		},
		"process count from the node container's resources": {
			job:       rtt.MakeTrainJob("ns", "job").Obj(),
			rt:        rtt.MakeTorchRuntime("torch").TrainerResources(rtt.Limits("nvidia.com/gpu", "8")).Obj(),
			wantEnv:   staticEnv("1", "8", "job-node-0-0.job"),
			wantPorts: torchPort,
			wantNodes: 1,
		},
		"elastic: min:max, c10d rendezvous, pod count is maxNodes": {
			job: rtt.MakeTrainJob("ns", "job").Obj(),
			rt: rtt.MakeTorchRuntime("torch").MLPolicy(&trainer.MLPolicy{MLPolicySource: trainer.MLPolicySource{
				Torch: &trainer.TorchMLPolicySource{ElasticPolicy: &trainer.TorchElasticPolicy{
					MinNodes: ptr.To[int32](2), MaxNodes: ptr.To[int32](5), MaxRestarts: ptr.To[int32](3),
				}},
			}}).Obj(),
			wantEnv: []corev1.EnvVar{
				env("PET_NNODES", "2:5"),
				env("PET_NPROC_PER_NODE", "1"),
				env("PET_RDZV_BACKEND", "c10d"),
				env("PET_RDZV_ENDPOINT", "job-node-0-0.job.ns.svc.cluster.local:29500"),
				env("PET_RDZV_ID", "job"),
				env("PET_MAX_RESTARTS", "3"),
			},
			wantPorts: torchPort,
			wantNodes: 5,
		},
		"elastic: the trainer's numNodes sets the pod count, the bounds stay": {
			job: rtt.MakeTrainJob("ns", "job").NumNodes(3).Obj(),
			rt: rtt.MakeTorchRuntime("torch").MLPolicy(&trainer.MLPolicy{MLPolicySource: trainer.MLPolicySource{
				Torch: &trainer.TorchMLPolicySource{ElasticPolicy: &trainer.TorchElasticPolicy{
					MinNodes: ptr.To[int32](2), MaxNodes: ptr.To[int32](5),
				}},
			}}).Obj(),
			wantEnv: []corev1.EnvVar{
				env("PET_NNODES", "2:5"),
				env("PET_NPROC_PER_NODE", "1"),
				env("PET_RDZV_BACKEND", "c10d"),
				env("PET_RDZV_ENDPOINT", "job-node-0-0.job.ns.svc.cluster.local:29500"),
				env("PET_RDZV_ID", "job"),
			},
			wantPorts: torchPort,
			wantNodes: 3,
		},
		"elastic without bounds: the node count is both bounds": {
			job: rtt.MakeTrainJob("ns", "job").NumNodes(2).Obj(),
			rt: rtt.MakeTorchRuntime("torch").MLPolicy(&trainer.MLPolicy{MLPolicySource: trainer.MLPolicySource{
				Torch: &trainer.TorchMLPolicySource{ElasticPolicy: &trainer.TorchElasticPolicy{}},
			}}).Obj(),
			wantEnv: []corev1.EnvVar{
				env("PET_NNODES", "2:2"),
				env("PET_NPROC_PER_NODE", "1"),
				env("PET_RDZV_BACKEND", "c10d"),
				env("PET_RDZV_ENDPOINT", "job-node-0-0.job.ns.svc.cluster.local:29500"),
				env("PET_RDZV_ID", "job"),
			},
			wantPorts: torchPort,
			wantNodes: 2,
		},
		"elastic: the endpoint is node 0's fully qualified name, with the runtime's subdomain and the plugin's cluster domain": {
			plugin: &torch.Torch{ClusterDomain: "corp.example"},
			job:    rtt.MakeTrainJob("team", "llama").NumNodes(3).Obj(),
			rt: rtt.MakeTorchRuntime("torch").Subdomain("train-net").MLPolicy(&trainer.MLPolicy{MLPolicySource: trainer.MLPolicySource{
				Torch: &trainer.TorchMLPolicySource{ElasticPolicy: &trainer.TorchElasticPolicy{
					MinNodes: ptr.To[int32](2), MaxNodes: ptr.To[int32](3),
				}},
			}}).Obj(),
			wantEnv: []corev1.EnvVar{
				env("PET_NNODES", "2:3"),
				env("PET_NPROC_PER_NODE", "1"),
				env("PET_RDZV_BACKEND", "c10d"),
				env("PET_RDZV_ENDPOINT", "llama-node-0-0.train-net.team.svc.corp.example:29500"),
				env("PET_RDZV_ID", "llama"),
			},
			wantPorts: torchPort,
			wantNodes: 3,
		},
		"elastic: the default cluster domain is cluster.local": {
			plugin: torch.New(),
			job:    rtt.MakeTrainJob("ns", "job").NumNodes(2).Obj(),
			rt: rtt.MakeTorchRuntime("torch").MLPolicy(&trainer.MLPolicy{MLPolicySource: trainer.MLPolicySource{
				Torch: &trainer.TorchMLPolicySource{ElasticPolicy: &trainer.TorchElasticPolicy{}},
			}}).Obj(),
			wantEnv: []corev1.EnvVar{
				env("PET_NNODES", "2:2"),
				env("PET_NPROC_PER_NODE", "1"),
				env("PET_RDZV_BACKEND", "c10d"),
				env("PET_RDZV_ENDPOINT", "job-node-0-0.job.ns.svc.cluster.local:29500"),
				env("PET_RDZV_ID", "job"),
			},
			wantPorts: torchPort,
			wantNodes: 2,
		},
		"not elastic: the cluster domain does not change MASTER_ADDR": {
			plugin:    &torch.Torch{ClusterDomain: "corp.example"},
			job:       rtt.MakeTrainJob("team", "llama").NumNodes(2).Obj(),
			rt:        rtt.MakeTorchRuntime("torch").Subdomain("train-net").Obj(),
			wantEnv:   staticEnv("2", "1", "llama-node-0-0.train-net"),
			wantPorts: torchPort,
			wantNodes: 2,
		},
		"envInjection targets get the same variables": {
			job: rtt.MakeTrainJob("ns", "job").NumNodes(2).Obj(),
			rt: sidecarRuntime().
				ContainerEnv("node", "sidecar", env("KEEP", "1")).
				Torch(&trainer.TorchMLPolicySource{EnvInjection: &trainer.EnvInjection{Targets: []trainer.EnvInjectionTarget{
					{JobName: "node", ContainerNames: []string{"sidecar"}},
					{JobName: "launcher", ContainerNames: []string{"agent"}},
				}}}).Obj(),
			wantEnv: staticEnv("2", "1", "job-node-0-0.job"),
			wantInjected: map[string][]corev1.EnvVar{
				"node/sidecar":   append([]corev1.EnvVar{env("KEEP", "1")}, staticEnv("2", "1", "job-node-0-0.job")...),
				"launcher/agent": staticEnv("2", "1", "job-node-0-0.job"),
			},
			wantPorts: torchPort,
			wantNodes: 2,
		},
		"envInjection with elastic: targets get the elastic variables": {
			job: rtt.MakeTrainJob("ns", "job").Obj(),
			rt: sidecarRuntime().
				Torch(&trainer.TorchMLPolicySource{
					ElasticPolicy: &trainer.TorchElasticPolicy{MinNodes: ptr.To[int32](1), MaxNodes: ptr.To[int32](2)},
					EnvInjection:  &trainer.EnvInjection{Targets: []trainer.EnvInjectionTarget{{JobName: "node", ContainerNames: []string{"sidecar"}}}},
				}).Obj(),
			wantEnv: []corev1.EnvVar{
				env("PET_NNODES", "1:2"),
				env("PET_NPROC_PER_NODE", "1"),
				env("PET_RDZV_BACKEND", "c10d"),
				env("PET_RDZV_ENDPOINT", "job-node-0-0.job.ns.svc.cluster.local:29500"),
				env("PET_RDZV_ID", "job"),
			},
			wantInjected: map[string][]corev1.EnvVar{
				"node/sidecar": {
					env("PET_NNODES", "1:2"),
					env("PET_NPROC_PER_NODE", "1"),
					env("PET_RDZV_BACKEND", "c10d"),
					env("PET_RDZV_ENDPOINT", "job-node-0-0.job.ns.svc.cluster.local:29500"),
					env("PET_RDZV_ID", "job"),
				},
			},
			wantPorts: torchPort,
			wantNodes: 2,
		},
		"envInjection naming an unknown container": {
			job: rtt.MakeTrainJob("ns", "job").Obj(),
			rt: sidecarRuntime().
				Torch(&trainer.TorchMLPolicySource{EnvInjection: &trainer.EnvInjection{Targets: []trainer.EnvInjectionTarget{
					{JobName: "launcher", ContainerNames: []string{"agent"}},
					{JobName: "node", ContainerNames: []string{"sidecar", "nope"}},
				}}}).Obj(),
			wantErr: []rtt.FieldErr{{Type: field.ErrorTypeNotFound, Field: "runtime.spec.mlPolicy.torch.envInjection.targets[1]"}},
		},
		"envInjection naming an unknown job": {
			job: rtt.MakeTrainJob("ns", "job").Obj(),
			rt: sidecarRuntime().
				Torch(&trainer.TorchMLPolicySource{EnvInjection: &trainer.EnvInjection{Targets: []trainer.EnvInjectionTarget{
					{JobName: "nope", ContainerNames: []string{"agent"}},
				}}}).Obj(),
			wantErr: []rtt.FieldErr{{Type: field.ErrorTypeNotFound, Field: "runtime.spec.mlPolicy.torch.envInjection.targets[0]"}},
		},
		"unresolvable process count": {
			job:     rtt.MakeTrainJob("ns", "job").NumProcPerNode(intstr.FromString("gpu")).Obj(),
			rt:      rtt.MakeTorchRuntime("torch").Obj(),
			wantErr: []rtt.FieldErr{{Type: field.ErrorTypeInvalid, Field: "spec.trainer.numProcPerNode"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			info, err := runtime.NewInfo(runtime.TrainJobRequest(tc.job), tc.rt)
			if err != nil {
				t.Fatalf("NewInfo: %v", err)
			}
			plugin := tc.plugin
			if plugin == nil {
				plugin = torch.New()
			}
			err = plugin.EnforceMLPolicy(info, runtime.TrainJobRequest(tc.job))
			if diff := cmp.Diff(tc.wantErr, rtt.FieldErrsOf(err)); diff != "" {
				t.Fatalf("error (-want +got):\n%s", diff)
			}
			if err != nil {
				return
			}
			c := info.TrainerContainer()
			if diff := cmp.Diff(tc.wantEnv, c.Env); diff != "" {
				t.Errorf("node env (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantPorts, c.Ports); diff != "" {
				t.Errorf("node ports (-want +got):\n%s", diff)
			}
			if info.NumNodes != tc.wantNodes {
				t.Errorf("NumNodes = %d, want %d", info.NumNodes, tc.wantNodes)
			}
			for key, want := range tc.wantInjected {
				rjob, name, _ := strings.Cut(key, "/")
				tcont := info.Container(rjob, name)
				if tcont == nil {
					t.Fatalf("container %s missing", key)
				}
				if diff := cmp.Diff(want, tcont.Env); diff != "" {
					t.Errorf("%s env (-want +got):\n%s", key, diff)
				}
				if len(tcont.Ports) != 0 {
					t.Errorf("%s ports = %v, want none (only node serves the master port)", key, tcont.Ports)
				}
			}
		})
	}
}

// Validate reports a torch runtime without a node container as a field error
// first; EnforceMLPolicy still refuses it, with a plain error.
func TestEnforceMLPolicyWithoutNodeContainer(t *testing.T) {
	job := rtt.MakeTrainJob("ns", "job").Obj()
	rt := rtt.MakeTorchRuntime("torch").ReplicatedJobs(
		rtt.MakeReplicatedJob("node", "trainer", rtt.MakeContainer("trainer", "torch:1"))).Obj()
	info, err := runtime.NewInfo(runtime.TrainJobRequest(job), rt)
	if err != nil {
		t.Fatal(err)
	}
	err = torch.New().EnforceMLPolicy(info, runtime.TrainJobRequest(job))
	if err == nil || !strings.Contains(err.Error(), `"node"`) {
		t.Errorf("EnforceMLPolicy error = %v, want one naming the missing node container", err)
	}
}

// A runtime without a torch policy is not touched by the plugin at all.
func TestEnforceMLPolicyNonTorch(t *testing.T) {
	cases := map[string]struct {
		rt *runtime.Runtime
	}{
		"no mlPolicy": {rt: rtt.MakeRuntime(trainer.ClusterTrainingRuntimeKind, "plain").Obj()},
		"mlPolicy with only numNodes": {
			rt: rtt.MakeRuntime(trainer.ClusterTrainingRuntimeKind, "plain").NumNodes(3).Obj(),
		},
		"mpi policy": {
			rt: rtt.MakeRuntime(trainer.TrainingRuntimeKind, "mpi").MLPolicy(&trainer.MLPolicy{
				MLPolicySource: trainer.MLPolicySource{MPI: &trainer.MPIMLPolicySource{}}}).Obj(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := rtt.MakeTrainJob("ns", "job").NumNodes(2).Env(env("RANK", "0")).Obj()
			info, err := runtime.NewInfo(runtime.TrainJobRequest(job), tc.rt)
			if err != nil {
				t.Fatalf("NewInfo: %v", err)
			}
			want, _ := runtime.NewInfo(runtime.TrainJobRequest(job), tc.rt)
			if err := torch.New().EnforceMLPolicy(info, runtime.TrainJobRequest(job)); err != nil {
				t.Fatalf("EnforceMLPolicy: %v", err)
			}
			if diff := cmp.Diff(want.Spec, info.Spec); diff != "" {
				t.Errorf("spec changed (-want +got):\n%s", diff)
			}
			if info.NumNodes != 2 {
				t.Errorf("NumNodes = %d, want 2", info.NumNodes)
			}
			if errs := torch.New().Validate(info, runtime.TrainJobRequest(job)); len(errs) != 0 {
				t.Errorf("Validate = %v, want none (RANK is only reserved on torch runtimes)", errs)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	cases := map[string]struct {
		job  *trainer.TrainJob
		rt   *runtime.Runtime
		want []rtt.FieldErr
	}{
		"reserved variables are rejected with their index, others are allowed": {
			job: rtt.MakeTrainJob("ns", "job").Env(
				env("PET_NNODES", "2"),
				env("FOO", "bar"),
				env("MASTER_ADDR", "x"),
				env("WORLD_SIZE", "8"),
				env("PET_REDIRECTS", "3"),
				env("RANK", "0"),
			).Obj(),
			rt: rtt.MakeTorchRuntime("torch").Obj(),
			want: []rtt.FieldErr{
				{Type: field.ErrorTypeInvalid, Field: "spec.trainer.env[0].name"},
				{Type: field.ErrorTypeInvalid, Field: "spec.trainer.env[2].name"},
				{Type: field.ErrorTypeInvalid, Field: "spec.trainer.env[3].name"},
				{Type: field.ErrorTypeInvalid, Field: "spec.trainer.env[5].name"},
			},
		},
		"every variable torchrun or the plugin sets is reserved": {
			job: rtt.MakeTrainJob("ns", "job").Env(
				env("PET_NPROC_PER_NODE", ""), env("PET_NODE_RANK", ""), env("PET_MASTER_ADDR", ""), env("PET_MASTER_PORT", ""),
				env("PET_RDZV_BACKEND", ""), env("PET_RDZV_ENDPOINT", ""), env("PET_RDZV_ID", ""), env("PET_MAX_RESTARTS", ""),
				env("MASTER_PORT", ""), env("LOCAL_RANK", ""), env("GROUP_RANK", ""), env("LOCAL_WORLD_SIZE", ""),
			).Obj(),
			rt: rtt.MakeTorchRuntime("torch").Obj(),
			want: func() []rtt.FieldErr {
				var out []rtt.FieldErr
				for k := 0; k < 12; k++ {
					out = append(out, rtt.FieldErr{Type: field.ErrorTypeInvalid, Field: fmt.Sprintf("spec.trainer.env[%d].name", k)})
				}
				return out
			}(),
		},
		"PET_REDIRECTS and ordinary variables are fine": {
			job: rtt.MakeTrainJob("ns", "job").Env(env("PET_REDIRECTS", "3"), env("NCCL_DEBUG", "INFO")).Obj(),
			rt:  rtt.MakeTorchRuntime("torch").Obj(),
		},
		"no trainer": {
			job: rtt.MakeTrainJob("ns", "job").Obj(),
			rt:  rtt.MakeTorchRuntime("torch").Obj(),
		},
		"gpu processes without a GPU anywhere": {
			job:  rtt.MakeTrainJob("ns", "job").NumProcPerNode(intstr.FromString("gpu")).ResourcesPerNode(rtt.Requests("cpu", "4")).Obj(),
			rt:   rtt.MakeTorchRuntime("torch").Obj(),
			want: []rtt.FieldErr{{Type: field.ErrorTypeInvalid, Field: "spec.trainer.numProcPerNode"}},
		},
		"gpu processes of the runtime without a GPU": {
			job:  rtt.MakeTrainJob("ns", "job").Obj(),
			rt:   rtt.MakeTorchRuntime("torch").TorchNumProcPerNode(intstr.FromString("gpu")).Obj(),
			want: []rtt.FieldErr{{Type: field.ErrorTypeInvalid, Field: "spec.trainer.numProcPerNode"}},
		},
		"gpu processes with GPUs from resourcesPerNode": {
			job: rtt.MakeTrainJob("ns", "job").NumProcPerNode(intstr.FromString("gpu")).ResourcesPerNode(rtt.Limits("nvidia.com/gpu", "2")).Obj(),
			rt:  rtt.MakeTorchRuntime("torch").Obj(),
		},
		"gpu processes with a GPU only in the runtime, memory from the TrainJob": {
			job: rtt.MakeTrainJob("ns", "job").NumProcPerNode(intstr.FromString("gpu")).ResourcesPerNode(rtt.Requests("memory", "8Gi")).Obj(),
			rt:  rtt.MakeTorchRuntime("torch").TrainerResources(rtt.Limits("nvidia.com/gpu", "4")).Obj(),
		},
		"zero processes and a reserved variable are both reported": {
			job: rtt.MakeTrainJob("ns", "job").Env(env("RANK", "0")).NumProcPerNode(intstr.FromInt32(0)).Obj(),
			rt:  rtt.MakeTorchRuntime("torch").Obj(),
			want: []rtt.FieldErr{
				{Type: field.ErrorTypeInvalid, Field: "spec.trainer.env[0].name"},
				{Type: field.ErrorTypeInvalid, Field: "spec.trainer.numProcPerNode"},
			},
		},
		"an unknown process mode": {
			job:  rtt.MakeTrainJob("ns", "job").NumProcPerNode(intstr.FromString("tpu")).Obj(),
			rt:   rtt.MakeTorchRuntime("torch").Obj(),
			want: []rtt.FieldErr{{Type: field.ErrorTypeNotSupported, Field: "spec.trainer.numProcPerNode"}},
		},
		"torch runtime without a trainer node container": {
			job: rtt.MakeTrainJob("ns", "job").Obj(),
			rt: rtt.MakeTorchRuntime("torch").ReplicatedJobs(
				rtt.MakeReplicatedJob("node", "", rtt.MakeContainer("node", "torch:1"))).Obj(),
			want: []rtt.FieldErr{{Type: field.ErrorTypeInvalid, Field: "spec.runtimeRef"}},
		},
		"reserved variable and missing container are both reported": {
			job: rtt.MakeTrainJob("ns", "job").Env(env("WORLD_SIZE", "8")).Obj(),
			rt: rtt.MakeTorchRuntime("torch").ReplicatedJobs(
				rtt.MakeReplicatedJob("node", "trainer", rtt.MakeContainer("main", "torch:1"))).Obj(),
			want: []rtt.FieldErr{
				{Type: field.ErrorTypeInvalid, Field: "spec.trainer.env[0].name"},
				{Type: field.ErrorTypeInvalid, Field: "spec.runtimeRef"},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// Validate sees the Info as NewInfo builds it; NewInfo itself must not
			// fail on a missing container when the TrainJob sets no env.
			info, err := runtime.NewInfo(runtime.TrainJobRequest(rtt.MakeTrainJob("ns", "job").Obj()), tc.rt)
			if err != nil {
				t.Fatalf("NewInfo: %v", err)
			}
			got := torch.New().Validate(info, runtime.TrainJobRequest(tc.job))
			if diff := cmp.Diff(tc.want, rtt.FieldErrs(got)); diff != "" {
				t.Errorf("Validate (-want +got):\n%s", diff)
			}
		})
	}
}

func TestIsReserved(t *testing.T) {
	cases := map[string]bool{
		"PET_NNODES": true, "PET_NPROC_PER_NODE": true, "PET_NODE_RANK": true, "PET_MASTER_ADDR": true,
		"PET_MASTER_PORT": true, "MASTER_ADDR": true, "MASTER_PORT": true, "WORLD_SIZE": true, "RANK": true,
		"LOCAL_RANK": true, "GROUP_RANK": true, "LOCAL_WORLD_SIZE": true,
		"PET_REDIRECTS": false, "PET_TEE": false, "pet_nnodes": false, "": false, "NCCL_DEBUG": false, "RANKS": false,
	}
	for name, want := range cases {
		t.Run(name, func(t *testing.T) {
			if got := torch.IsReserved(name); got != want {
				t.Errorf("IsReserved(%q) = %v, want %v", name, got, want)
			}
		})
	}
}

func TestProcPerNode(t *testing.T) {
	str := func(s string) *intstr.IntOrString { return ptr.To(intstr.FromString(s)) }
	num := func(n int) *intstr.IntOrString { return ptr.To(intstr.FromInt32(int32(n))) }
	cases := map[string]struct {
		runtimeValue *intstr.IntOrString
		jobValue     *intstr.IntOrString
		res          corev1.ResourceRequirements
		want         string
		wantErr      []rtt.FieldErr
	}{
		"default auto, GPUs in limits": {
			res:  rtt.Limits("nvidia.com/gpu", "4"),
			want: "4",
		},
		"default auto, GPUs only in requests": {
			res:  rtt.Requests("nvidia.com/gpu", "2"),
			want: "2",
		},
		"auto prefers GPUs over CPUs": {
			res:  corev1.ResourceRequirements{Requests: rtt.ResourceList("cpu", "32"), Limits: rtt.ResourceList("nvidia.com/gpu", "8")},
			want: "8",
		},
		"auto counts any *gpu resource": {
			res:  rtt.Limits("amd.com/gpu", "2"),
			want: "2",
		},
		"auto with only CPU requests rounds up": {
			res:  rtt.Requests("cpu", "2500m"),
			want: "3",
		},
		"auto with CPU request and limit uses the request": {
			res:  corev1.ResourceRequirements{Requests: rtt.ResourceList("cpu", "2"), Limits: rtt.ResourceList("cpu", "6")},
			want: "2",
		},
		"auto with only a CPU limit": {
			res:  rtt.Limits("cpu", "6"),
			want: "6",
		},
		"auto with a fraction of a CPU is one": {
			res:  rtt.Requests("cpu", "100m"),
			want: "1",
		},
		"auto with no resources is one": {
			want: "1",
		},
		"auto with only memory is one": {
			res:  rtt.Requests("memory", "64Gi"),
			want: "1",
		},
		"explicit auto from the runtime": {
			runtimeValue: str("auto"),
			res:          rtt.Requests("cpu", "4"),
			want:         "4",
		},
		"cpu ignores GPUs": {
			runtimeValue: str("cpu"),
			res:          corev1.ResourceRequirements{Requests: rtt.ResourceList("cpu", "8"), Limits: rtt.ResourceList("nvidia.com/gpu", "4")},
			want:         "8",
		},
		"cpu with no resources is one": {
			jobValue: str("cpu"),
			want:     "1",
		},
		"gpu with GPUs": {
			runtimeValue: str("gpu"),
			res:          corev1.ResourceRequirements{Requests: rtt.ResourceList("cpu", "8"), Limits: rtt.ResourceList("nvidia.com/gpu", "4")},
			want:         "4",
		},
		"gpu without GPUs is an error": {
			runtimeValue: str("gpu"),
			res:          rtt.Requests("cpu", "8"),
			wantErr:      []rtt.FieldErr{{Type: field.ErrorTypeInvalid, Field: "spec.trainer.numProcPerNode"}},
		},
		"gpu from the trainer without GPUs is an error": {
			jobValue: str("gpu"),
			wantErr:  []rtt.FieldErr{{Type: field.ErrorTypeInvalid, Field: "spec.trainer.numProcPerNode"}},
		},
		"integer from the runtime": {
			runtimeValue: num(8),
			res:          rtt.Limits("nvidia.com/gpu", "4"),
			want:         "8",
		},
		"integer from the trainer overrides the runtime's string": {
			runtimeValue: str("gpu"),
			jobValue:     num(3),
			want:         "3",
		},
		"string from the trainer overrides the runtime's integer": {
			runtimeValue: num(8),
			jobValue:     str("auto"),
			res:          rtt.Limits("nvidia.com/gpu", "2"),
			want:         "2",
		},
		"integer below one is an error": {
			jobValue: num(0),
			wantErr:  []rtt.FieldErr{{Type: field.ErrorTypeInvalid, Field: "spec.trainer.numProcPerNode"}},
		},
		"unknown string is not supported": {
			runtimeValue: str("tpu"),
			wantErr:      []rtt.FieldErr{{Type: field.ErrorTypeNotSupported, Field: "spec.trainer.numProcPerNode"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pol := &trainer.TorchMLPolicySource{NumProcPerNode: tc.runtimeValue}
			w := rtt.MakeTrainJob("ns", "job")
			if tc.jobValue != nil {
				w.NumProcPerNode(*tc.jobValue)
			}
			job := w.Obj()
			got, err := torch.ProcPerNode(pol, runtime.TrainJobRequest(job), tc.res)
			if diff := cmp.Diff(tc.wantErr, rtt.FieldErrsOf(err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if got != tc.want {
				t.Errorf("ProcPerNode = %q, want %q", got, tc.want)
			}
		})
	}
}

// The full pipeline: the Resources plugin merges resourcesPerNode into the node
// container before the Torch plugin counts processes, so the count sees both the
// runtime's and the TrainJob's resources.
func TestProcPerNodeThroughFramework(t *testing.T) {
	cases := map[string]struct {
		rt          *runtime.Runtime
		job         *trainer.TrainJob
		wantNProc   string
		wantRes     corev1.ResourceRequirements
		wantErr     []rtt.FieldErr
		wantInvalid bool
	}{
		"GPU only in the runtime, the TrainJob overrides only memory": {
			rt: rtt.MakeTorchRuntime("torch").TrainerResources(rtt.Limits("nvidia.com/gpu", "4")).Obj(),
			job: rtt.MakeTrainJob("ns", "job").NumNodes(2).
				ResourcesPerNode(corev1.ResourceRequirements{Requests: rtt.ResourceList("memory", "16Gi"), Limits: rtt.ResourceList("memory", "16Gi")}).Obj(),
			wantNProc: "4",
			wantRes: corev1.ResourceRequirements{
				Requests: rtt.ResourceList("memory", "16Gi", "nvidia.com/gpu", "4"),
				Limits:   rtt.ResourceList("memory", "16Gi", "nvidia.com/gpu", "4"),
			},
		},
		"GPU only in the runtime, gpu mode, the TrainJob sets only a memory request": {
			rt: rtt.MakeTorchRuntime("torch").TorchNumProcPerNode(intstr.FromString("gpu")).
				TrainerResources(rtt.Limits("nvidia.com/gpu", "2")).Obj(),
			job:       rtt.MakeTrainJob("ns", "job").ResourcesPerNode(rtt.Requests("memory", "8Gi")).Obj(),
			wantNProc: "2",
			wantRes: corev1.ResourceRequirements{
				Requests: rtt.ResourceList("memory", "8Gi", "nvidia.com/gpu", "2"),
				Limits:   rtt.ResourceList("nvidia.com/gpu", "2"),
			},
		},
		"GPUs from the TrainJob on a CPU runtime": {
			rt:        rtt.MakeTorchRuntime("torch").TrainerResources(rtt.Requests("cpu", "4")).Obj(),
			job:       rtt.MakeTrainJob("ns", "job").ResourcesPerNode(rtt.Limits("nvidia.com/gpu", "8")).Obj(),
			wantNProc: "8",
			wantRes: corev1.ResourceRequirements{
				Requests: rtt.ResourceList("cpu", "4", "nvidia.com/gpu", "8"),
				Limits:   rtt.ResourceList("nvidia.com/gpu", "8"),
			},
		},
		"CPUs of the TrainJob win over the runtime's": {
			rt:        rtt.MakeTorchRuntime("torch").TrainerResources(rtt.Requests("cpu", "16")).Obj(),
			job:       rtt.MakeTrainJob("ns", "job").ResourcesPerNode(rtt.Requests("cpu", "2500m")).Obj(),
			wantNProc: "3",
			wantRes:   rtt.Requests("cpu", "2500m"),
		},
		"gpu mode with no GPU anywhere is an invalid TrainJob": {
			rt:          rtt.MakeTorchRuntime("torch").TrainerResources(rtt.Requests("cpu", "4")).Obj(),
			job:         rtt.MakeTrainJob("ns", "job").NumProcPerNode(intstr.FromString("gpu")).ResourcesPerNode(rtt.Requests("memory", "1Gi")).Obj(),
			wantErr:     []rtt.FieldErr{{Type: field.ErrorTypeInvalid, Field: "spec.trainer.numProcPerNode"}},
			wantInvalid: true,
		},
	}
	fw, err := plugins.NewFramework()
	if err != nil {
		t.Fatalf("NewFramework: %v", err)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			built, err := fw.Build(runtime.TrainJobRequest(tc.job), tc.rt)
			objs := built.Objects()
			if diff := cmp.Diff(tc.wantErr, rtt.FieldErrsOf(err)); diff != "" {
				t.Fatalf("Build error (-want +got):\n%s", diff)
			}
			if err != nil {
				if framework.IsInvalid(err) != tc.wantInvalid {
					t.Errorf("IsInvalid(%v) = %v, want %v", err, framework.IsInvalid(err), tc.wantInvalid)
				}
				return
			}
			js := objs[0].(*jobsetv1alpha2.JobSet)
			c := js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0]
			var got string
			for _, e := range c.Env {
				if e.Name == "PET_NPROC_PER_NODE" {
					got = e.Value
				}
			}
			if got != tc.wantNProc {
				t.Errorf("PET_NPROC_PER_NODE = %q, want %q", got, tc.wantNProc)
			}
			if diff := cmp.Diff(tc.wantRes, c.Resources); diff != "" {
				t.Errorf("node resources (-want +got):\n%s", diff)
			}
		})
	}
}
