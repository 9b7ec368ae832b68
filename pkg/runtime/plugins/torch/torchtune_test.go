package torch_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/plugins"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/torch"
	rtt "github.com/trainyard/trainyard/test/util/rtt"
)

// tuneRuntime is the shape of the shipped torchtune runtimes: the recipe
// command with the initializers' paths.
func tuneRuntime(name string, gpus string) *rtt.RuntimeWrapper {
	w := rtt.MakeTorchRuntime(name).PodSpec("node", func(ps *corev1.PodSpec) {
		ps.Containers[0].Command = []string{"tune", "run", "--rdzv_endpoint=localhost:29500", "full_finetune_distributed",
			"--config", "llama3_2/1B_full", "dataset=torchtune.datasets.instruct_dataset", "output_dir=/workspace/output",
			"tokenizer.path=/workspace/model/original/tokenizer.model", "checkpointer.checkpoint_dir=/workspace/model"}
	})
	if gpus != "" {
		w.TrainerResources(rtt.Limits("nvidia.com/gpu", gpus))
	}
	return w
}

var tunePaths = []string{"output_dir=/workspace/output", "tokenizer.path=/workspace/model/original/tokenizer.model", "checkpointer.checkpoint_dir=/workspace/model"}

func tuneCmd(head ...string) []string {
	return append(append([]string{"tune", "run"}, head...), tunePaths...)
}

func TestTorchtuneCommand(t *testing.T) {
	cases := map[string]struct {
		job     *trainer.TrainJob
		rt      *runtime.Runtime
		wantCmd []string
	}{
		"two GPUs: distributed full fine-tune with the rendezvous on pod 0": {
			job:     rtt.MakeTrainJob("ns", "job").Command("tune", "run").Obj(),
			rt:      tuneRuntime("torchtune-llama3.2-1b", "2").Obj(),
			wantCmd: tuneCmd("--rdzv_endpoint=job-node-0-0.job:29500", "full_finetune_distributed", "--config", "llama3_2/1B_full"),
		},
		"one GPU: single-device full fine-tune": {
			job:     rtt.MakeTrainJob("ns", "job").Command("tune", "run").ResourcesPerNode(rtt.Limits("nvidia.com/gpu", "1")).Obj(),
			rt:      tuneRuntime("torchtune-llama3.2-3b", "2").Obj(),
			wantCmd: tuneCmd("full_finetune_single_device", "--config", "llama3_2/3B_full_single_device"),
		},
		"numProcPerNode 1: single-device LoRA": {
			job: rtt.MakeTrainJob("ns", "job").Command("tune", "run").NumProcPerNode(intstr.FromInt32(1)).
				Args("model.lora_attn_modules=[q_proj,v_proj]").Obj(),
			rt:      tuneRuntime("torchtune-llama3.2-1b", "2").Obj(),
			wantCmd: tuneCmd("lora_finetune_single_device", "--config", "llama3_2/1B_lora_single_device"),
		},
		"one GPU: single-device QLoRA": {
			job: rtt.MakeTrainJob("ns", "job").Command("tune", "run").ResourcesPerNode(rtt.Limits("nvidia.com/gpu", "1")).
				Args("model.lora_attn_modules=[q_proj]", "model.quantize_base=True").Obj(),
			rt:      tuneRuntime("torchtune-llama3.2-1b", "").Obj(),
			wantCmd: tuneCmd("lora_finetune_single_device", "--config", "llama3_2/1B_qlora_single_device"),
		},
		"DoRA is not QLoRA: distributed LoRA on 4 GPUs": {
			job: rtt.MakeTrainJob("ns", "job").Command("tune", "run").
				Args("model.lora_attn_modules=[q_proj]", "model.quantize_base=true", "model.use_dora=true").Obj(),
			rt:      tuneRuntime("torchtune-llama3.2-1b", "4").Obj(),
			wantCmd: tuneCmd("--rdzv_endpoint=job-node-0-0.job:29500", "lora_finetune_distributed", "--config", "llama3_2/1B_lora"),
		},
		"70B on two nodes: multi-node full fine-tune": {
			job:     rtt.MakeTrainJob("ns", "job").Command("tune", "run").NumNodes(2).Obj(),
			rt:      tuneRuntime("torchtune-llama3.3-70b", "8").Obj(),
			wantCmd: tuneCmd("--rdzv_endpoint=job-node-0-0.job:29500", "full_finetune_distributed", "--config", "llama3_3/70B_full_multinode"),
		},
		"CPU only, no process count: distributed full fine-tune without a rendezvous flag": {
			job:     rtt.MakeTrainJob("ns", "job").Command("tune", "run").Obj(),
			rt:      tuneRuntime("torchtune-qwen2.5-1.5b", "").Obj(),
			wantCmd: tuneCmd("full_finetune_distributed", "--config", "qwen2_5/1.5B_full"),
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
			c := runtime.TrainerContainer(&p.JobSet().Spec)
			if diff := cmp.Diff(tc.wantCmd, c.Command); diff != "" {
				t.Errorf("command (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.job.Spec.Trainer.Args, c.Args); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
			// No master variables: tune run has the endpoint on its command line.
			for _, e := range c.Env {
				if e.Name == torch.EnvMasterAddr || e.Name == torch.EnvMasterPort {
					t.Errorf("torchtune container has %s", e.Name)
				}
			}
			if len(c.Env) != 3 || c.Env[0].Name != torch.EnvNumNodes || c.Env[2].Name != torch.EnvNodeRank {
				t.Errorf("env = %v, want PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK", c.Env)
			}
		})
	}
}

func TestTorchtuneNotTriggered(t *testing.T) {
	// Only exactly ["tune", "run"] switches the mode on.
	fw, err := plugins.NewFramework()
	if err != nil {
		t.Fatal(err)
	}
	job := rtt.MakeTrainJob("ns", "job").Command("tune", "run", "full_finetune_distributed").Obj()
	p, err := fw.Build(runtime.TrainJobRequest(job), tuneRuntime("torchtune-llama3.2-1b", "2").Obj())
	if err != nil {
		t.Fatal(err)
	}
	c := runtime.TrainerContainer(&p.JobSet().Spec)
	if diff := cmp.Diff(job.Spec.Trainer.Command, c.Command); diff != "" {
		t.Errorf("command (-want +got):\n%s", diff)
	}
	if got := torch.TuneModel("torchtune-llama3.2-1b"); got != "llama3_2/1B" {
		t.Errorf("TuneModel = %q", got)
	}
}

func TestTorchtuneValidate(t *testing.T) {
	tr := field.NewPath("spec", "trainer")
	rtName := field.NewPath("spec", "runtimeRef", "name")
	tune := func() *rtt.TrainJobWrapper { return rtt.MakeTrainJob("ns", "job").Command("tune", "run") }
	qlora := []string{"model.lora_attn_modules=[q_proj]", "model.quantize_base=TRUE"}
	cases := map[string]struct {
		job  *trainer.TrainJob
		rt   *runtime.Runtime
		want field.ErrorList
	}{
		"valid": {job: tune().Args("epochs=1").Obj(), rt: tuneRuntime("torchtune-llama3.2-1b", "2").Obj()},
		"unknown model": {
			job:  tune().Obj(),
			rt:   tuneRuntime("torchtune-mistral-7b", "2").Obj(),
			want: field.ErrorList{field.Invalid(rtName, "torchtune-mistral-7b", "must have a supported pretrained model, invalid model configured: mistral/7B")},
		},
		"a runtime name that is not torchtune-<model>-<size>": {
			job:  tune().Obj(),
			rt:   tuneRuntime("my-torchtune", "2").Obj(),
			want: field.ErrorList{field.Invalid(rtName, "my-torchtune", "must have a supported pretrained model, invalid model configured: my-torchtune")},
		},
		"two nodes for a 1B model": {
			job:  tune().NumNodes(2).Obj(),
			rt:   tuneRuntime("torchtune-llama3.2-1b", "2").Obj(),
			want: field.ErrorList{field.Invalid(tr.Child("numNodes"), int32(2), "must be 1 for llama3_2/1B model")},
		},
		"QLoRA on qwen": {
			job:  tune().Args(qlora...).ResourcesPerNode(rtt.Limits("nvidia.com/gpu", "1")).Obj(),
			rt:   tuneRuntime("torchtune-qwen2.5-1.5b", "").Obj(),
			want: field.ErrorList{field.Invalid(rtName, "torchtune-qwen2.5-1.5b", "QLoRA is not supported for qwen2_5/1.5B model")},
		},
		"multi-device QLoRA on 3B": {
			job: tune().Args(qlora...).Obj(),
			rt:  tuneRuntime("torchtune-llama3.2-3b", "2").Obj(),
			want: field.ErrorList{
				field.Invalid(tr.Child("numProcPerNode"), (*intstr.IntOrString)(nil), "must be auto or 1 for llama3_2/3B model when using QLoRA"),
				field.Invalid(tr.Child("resourcesPerNode"), int64(2), "must have gpu resource with value 1 for llama3_2/3B model when using QLoRA"),
			},
		},
		"LoRA on several nodes (70B)": {
			job:  tune().NumNodes(2).Args("model.lora_attn_modules=[q_proj]").Obj(),
			rt:   tuneRuntime("torchtune-llama3.3-70b", "8").Obj(),
			want: field.ErrorList{field.Invalid(tr.Child("numNodes"), int32(2), "LoRA fine-tuning is not supported for multi-node training in TorchTune")},
		},
		"args that override the runtime's paths": {
			job: tune().Args("epochs=1", "output_dir=/tmp", "tokenizer.merges_file=/x").Obj(),
			rt:  tuneRuntime("torchtune-llama3.2-1b", "2").Obj(),
			want: field.ErrorList{
				field.Invalid(tr.Child("args").Index(1), "output_dir=/tmp", `must not set immutable config "output_dir" in trainer args; it is managed by the runtime`),
				field.Invalid(tr.Child("args").Index(2), "tokenizer.merges_file=/x", `must not set immutable config "tokenizer.merges_file" in trainer args; it is managed by the runtime`),
			},
		},
	}
	fw, err := plugins.NewFramework()
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, fw.Validate(tc.rt, runtime.TrainJobRequest(tc.job))); diff != "" {
				t.Errorf("Validate (-want +got):\n%s", diff)
			}
			_, err := fw.Build(runtime.TrainJobRequest(tc.job), tc.rt)
			if diff := cmp.Diff(rtt.FieldErrs(tc.want), rtt.FieldErrsOf(err)); diff != "" {
				t.Errorf("Build errors (-want +got):\n%s", diff)
			}
		})
	}
}
