package framework_test

import (
	"encoding/json"
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
	"github.com/trainyard/trainyard/pkg/runtime/plugins"
	rtt "github.com/trainyard/trainyard/test/util/rtt"
)

// fuzzSeeds are TrainJob documents as users and tools write them.
var fuzzSeeds = []string{
	`{}`,
	`{"metadata":{"name":"j","namespace":"ns"},"spec":{"runtimeRef":{"name":"torch-distributed"}}}`,
	// examples/trainjob-torch.yaml, shortened
	`{"apiVersion":"trainer.kubeflow.org/v1alpha1","kind":"TrainJob","metadata":{"name":"torch-allreduce","namespace":"default"},
	  "spec":{"runtimeRef":{"name":"torch-distributed"},"trainer":{"numNodes":2,"image":"pytorch/pytorch:2.7.1",
	  "command":["torchrun","/tmp/allreduce.py"],
	  "resourcesPerNode":{"requests":{"cpu":"1","memory":"1Gi"},"limits":{"cpu":"1","memory":"1Gi"}}}}}`,
	// GPUs, string and integer numProcPerNode, env, suspend
	`{"metadata":{"name":"gpu","namespace":"ns"},"spec":{"suspend":true,"trainer":{"numNodes":4,"numProcPerNode":"gpu",
	  "env":[{"name":"NCCL_DEBUG","value":"INFO"},{"name":"PET_REDIRECTS","value":"3"}],
	  "resourcesPerNode":{"limits":{"nvidia.com/gpu":"8"}}}}}`,
	`{"metadata":{"name":"n","namespace":"ns"},"spec":{"trainer":{"numProcPerNode":3,"numNodes":0}}}`,
	`{"metadata":{"name":"r","namespace":"ns"},"spec":{"trainer":{"env":[{"name":"RANK","value":"0"}],
	  "resourcesPerNode":{"requests":{"cpu":"4"},"limits":{"cpu":"2"}}}}}`,
	// v2.1 overrides
	`{"metadata":{"name":"v21","namespace":"ns"},"spec":{"labels":{"team":"a"},"annotations":{"o":"b"},
	  "podTemplateOverrides":[{"targetJobs":[{"name":"node"}],"metadata":{"labels":{"p":"1"}},
	  "spec":{"nodeSelector":{"gpu":"a100"},"tolerations":[{"key":"nvidia.com/gpu","operator":"Exists"}],
	  "volumes":[{"name":"data","persistentVolumeClaim":{"claimName":"ds"}}],
	  "containers":[{"name":"node","env":[{"name":"X","value":"1"}],"volumeMounts":[{"name":"data","mountPath":"/data"}]}]}}]}}`,
	`{"metadata":{"name":"v21","namespace":"ns"},"spec":{"podTemplateOverrides":[{"targetJobs":[{"name":"launcher"}]}]}}`,
	// v2.3 patches
	`{"metadata":{"name":"v23","namespace":"ns"},"spec":{"runtimePatches":[{"manager":"kueue.x-k8s.io/manager",
	  "trainingRuntimeSpec":{"template":{"metadata":{"labels":{"q":"x"}},"spec":{"replicatedJobs":[{"name":"node",
	  "template":{"metadata":{"labels":{"trainer.kubeflow.org/trainjob-ancestor-step":"other"}},"spec":{"template":{"spec":{
	  "schedulingGates":[{"name":"g"}],"containers":[{"name":"node","env":[{"name":"Y","valueFrom":{"fieldRef":{"fieldPath":"metadata.name"}}}]}]}}}}}]}}}}]}}`,
	`{"metadata":{"name":"v23","namespace":"ns"},"spec":{"runtimePatches":[{"manager":"m","trainingRuntimeSpec":{"template":{"spec":
	  {"replicatedJobs":[{"name":"node","template":{"spec":{"template":{"spec":{"containers":[{"name":"ghost"}]}}}}}]}}}}]}}`,
	// initializers the runtime does not have
	`{"metadata":{"name":"init","namespace":"ns"},"spec":{"initializer":{"dataset":{"storageUri":"hf://x","secretRef":{"name":"s"}},
	  "model":{"storageUri":"s3://b/m","env":[{"name":"A","value":"1"}]}}}}`,
}

// FuzzBuild runs the whole pipeline on arbitrary TrainJobs against the shipped
// torch-distributed runtime. Errors are fine; a panic, a change to the inputs,
// an error the controller would retry forever, or a malformed JobSet are not.
func FuzzBuild(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	rt, err := rtt.TorchDistributedRuntime()
	if err != nil {
		f.Fatal(err)
	}
	fw, err := plugins.NewFramework()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var job trainer.TrainJob
		if err := json.Unmarshal(data, &job); err != nil {
			return
		}
		jobBefore := job.DeepCopy()
		r := *rt
		r.Spec = *rt.Spec.DeepCopy()

		built, err := fw.Build(runtime.TrainJobRequest(&job), &r)

		objs := built.Objects()

		if !apiequality.Semantic.DeepEqual(jobBefore, &job) {
			t.Errorf("Build changed the TrainJob")
		}
		if !apiequality.Semantic.DeepEqual(rt.Spec, r.Spec) {
			t.Errorf("Build changed the runtime")
		}
		if err != nil {
			// With a good runtime every failure is the TrainJob's: it must be
			// reported as invalid, not retried.
			if !framework.IsInvalid(err) {
				t.Errorf("Build error is not an InvalidError: %v", err)
			}
			if objs != nil {
				t.Errorf("Build returned objects with an error")
			}
			return
		}
		if len(objs) != 1 {
			t.Fatalf("Build returned %d objects, want 1", len(objs))
		}
		js, ok := objs[0].(*jobsetv1alpha2.JobSet)
		if !ok {
			t.Fatalf("Build returned %T", objs[0])
		}
		if js.Name != job.Name || js.Namespace != job.Namespace {
			t.Errorf("JobSet %s/%s for TrainJob %s/%s", js.Namespace, js.Name, job.Namespace, job.Name)
		}
		if js.Spec.Suspend == nil || *js.Spec.Suspend != (job.Spec.Suspend != nil && *job.Spec.Suspend) {
			t.Errorf("JobSet suspend %v for TrainJob suspend %v", js.Spec.Suspend, job.Spec.Suspend)
		}
		for _, rj := range js.Spec.ReplicatedJobs {
			if rj.Template.Labels[trainer.AncestorLabel] != trainer.AncestorTrainer {
				continue
			}
			p, c := rj.Template.Spec.Parallelism, rj.Template.Spec.Completions
			// numNodes may be 0 (Kubeflow Trainer v2.4): a trainer job of no pods.
			if p == nil || c == nil || *p < 0 || *p != *c || rj.Replicas != 1 {
				t.Errorf("trainer job %s: parallelism %v, completions %v, replicas %d", rj.Name, p, c, rj.Replicas)
			}
		}
	})
}
