package torch

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
)

// Torchtune mode: a TrainJob on a torchtune-<model>-<size> runtime whose
// command is exactly `tune run` (what the Kubeflow SDK's BuiltinTrainer
// sends). Trainyard picks the recipe and config for the model and the device
// layout, and keeps the runtime's paths (where the initializers put the model
// and dataset, where the output goes); the TrainJob's args are torchtune
// key=value overrides.

// Models Kubeflow Trainer's torchtune support knows; only the 70B model is
// large enough to be fine-tuned on more than one node.
const (
	ModelLlama3_2_1B  = "llama3_2/1B"
	ModelLlama3_2_3B  = "llama3_2/3B"
	ModelLlama3_3_70B = "llama3_3/70B"
	ModelQwen2_5_1_5B = "qwen2_5/1.5B"
)

var tuneModels = []string{ModelLlama3_2_1B, ModelLlama3_2_3B, ModelLlama3_3_70B, ModelQwen2_5_1_5B}

// tuneRuntimeKeys are the runtime command's key=value tokens that Trainyard
// carries into the rewritten command; the TrainJob must not override them.
var tuneRuntimeKeys = []string{"output_dir", "tokenizer.path", "checkpointer.checkpoint_dir", "tokenizer.merges_file"}

// IsTorchtune reports whether a TrainJob asks for torchtune mode.
func IsTorchtune(req *runtime.Request) bool {
	t := req.Trainer
	return t != nil && slices.Equal(t.Command, []string{"tune", "run"})
}

// TuneModel derives the torchtune model from a runtime name of three
// dash-separated parts: torchtune-llama3.2-1b → llama3_2/1B. Other names give
// the name itself, which no supported model matches.
func TuneModel(runtimeName string) string {
	parts := strings.Split(runtimeName, "-")
	if len(parts) != 3 {
		return runtimeName
	}
	return strings.ReplaceAll(parts[1], ".", "_") + "/" + strings.ToUpper(parts[2])
}

// tuneFlavour is what the args ask for: LoRA, and QLoRA (a quantized base model).
func tuneFlavour(args []string) (lora, qlora bool) {
	dora := false
	for _, a := range args {
		key, value, _ := strings.Cut(a, "=")
		if strings.Contains(a, "model.lora_attn_modules") {
			lora = true
		}
		if strings.Contains(key, "model.quantize_base") && strings.EqualFold(value, "true") {
			qlora = true
		}
		if strings.Contains(key, "model.use_dora") && strings.EqualFold(value, "true") {
			dora = true
		}
	}
	return lora, qlora && !dora
}

// tuneDevices: the explicit integer process count (0 when numProcPerNode is
// unset or a word), and the GPUs per node.
func tuneDevices(pol *trainer.TorchMLPolicySource, req *runtime.Request, gpus int64) (procs int64, gpusPerNode int64) {
	var v *intstr.IntOrString
	if pol != nil && pol.NumProcPerNode != nil {
		v = pol.NumProcPerNode
	}
	if req.Trainer != nil && req.Trainer.NumProcPerNode != nil {
		v = req.Trainer.NumProcPerNode
	}
	if v != nil && v.Type == intstr.Int {
		procs = int64(v.IntVal)
	}
	return procs, gpus
}

// validateTorchtune checks a torchtune TrainJob (Kubeflow Trainer's messages).
func validateTorchtune(info *runtime.Info, req *runtime.Request, gpus int64) field.ErrorList {
	t := req.Trainer
	model := TuneModel(info.Runtime.Name)
	if !slices.Contains(tuneModels, model) {
		return field.ErrorList{field.Invalid(req.Paths.Runtime.Child("name"), info.Runtime.Name,
			fmt.Sprintf("must have a supported pretrained model, invalid model configured: %s", model))}
	}
	var errs field.ErrorList
	nodesPath := req.Paths.Trainer.Child("numNodes")
	if info.NumNodes > 1 && model != ModelLlama3_3_70B {
		errs = append(errs, field.Invalid(nodesPath, info.NumNodes, fmt.Sprintf("must be 1 for %s model", model)))
	}
	lora, qlora := tuneFlavour(t.Args)
	if qlora {
		switch model {
		case ModelQwen2_5_1_5B:
			errs = append(errs, field.Invalid(req.Paths.Runtime.Child("name"), info.Runtime.Name,
				fmt.Sprintf("QLoRA is not supported for %s model", model)))
		case ModelLlama3_2_1B, ModelLlama3_2_3B:
			// QLoRA recipes for these models run on one device only.
			procs, _ := tuneDevices(policy(info), req, gpus)
			if procs > 1 || gpus > 1 {
				errs = append(errs,
					field.Invalid(req.Paths.Trainer.Child("numProcPerNode"), t.NumProcPerNode,
						fmt.Sprintf("must be auto or 1 for %s model when using QLoRA", model)),
					field.Invalid(req.Paths.Trainer.Child("resourcesPerNode"), gpus,
						fmt.Sprintf("must have gpu resource with value 1 for %s model when using QLoRA", model)))
			}
		}
	}
	if (lora || qlora) && info.NumNodes > 1 {
		errs = append(errs, field.Invalid(nodesPath, info.NumNodes, "LoRA fine-tuning is not supported for multi-node training in TorchTune"))
	}
	for i, a := range t.Args {
		key, _, _ := strings.Cut(a, "=")
		if slices.Contains(tuneRuntimeKeys, key) {
			errs = append(errs, field.Invalid(req.Paths.Trainer.Child("args").Index(i), a,
				fmt.Sprintf("must not set immutable config %q in trainer args; it is managed by the runtime", key)))
		}
	}
	return errs
}

// tuneCommand is the rewritten trainer command: tune run, the rendezvous
// endpoint when more than one device trains, the recipe and its config for the
// model, then the runtime's path settings.
func tuneCommand(info *runtime.Info, req *runtime.Request, gpus int64) []string {
	procs, gpus := tuneDevices(policy(info), req, gpus)
	lora, qlora := tuneFlavour(req.Trainer.Args)
	single := info.NumNodes == 1 && (procs == 1 || gpus == 1)

	cmd := []string{"tune", "run"}
	if info.NumNodes > 1 || procs > 1 || (procs == 0 && gpus > 1) {
		cmd = append(cmd, fmt.Sprintf("--rdzv_endpoint=%s:%s", info.MasterAddr(req), strconv.Itoa(int(trainer.ContainerTrainerPort))))
	}
	var recipe, suffix string
	switch {
	case single && qlora:
		recipe, suffix = "lora_finetune_single_device", "_qlora_single_device"
	case single && lora:
		recipe, suffix = "lora_finetune_single_device", "_lora_single_device"
	case single:
		recipe, suffix = "full_finetune_single_device", "_full_single_device"
	case info.NumNodes == 1 && qlora:
		recipe, suffix = "lora_finetune_distributed", "_qlora"
	case info.NumNodes == 1 && lora:
		recipe, suffix = "lora_finetune_distributed", "_lora"
	case info.NumNodes > 1:
		recipe, suffix = "full_finetune_distributed", "_full_multinode"
	default:
		recipe, suffix = "full_finetune_distributed", "_full"
	}
	cmd = append(cmd, recipe, "--config", TuneModel(info.Runtime.Name)+suffix)
	if rc := runtime.TrainerContainer(&info.Runtime.Spec.Template.Spec); rc != nil {
		for _, tok := range rc.Command {
			key, _, ok := strings.Cut(tok, "=")
			if ok && slices.Contains(tuneRuntimeKeys, key) {
				cmd = append(cmd, tok)
			}
		}
	}
	return cmd
}
