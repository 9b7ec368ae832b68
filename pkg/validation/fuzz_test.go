package validation

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/plugins"
	rttesting "github.com/trainyard/trainyard/test/util/rtt"
)

// Seeds: one valid TrainJob per shape, and the bad inputs of the admission table
// (test/integration/webhooks).
var trainJobSeeds = []string{
	`{"metadata":{"name":"ok"},"spec":{"runtimeRef":{"name":"torch"},"trainer":{"numNodes":2,"image":"x","env":[{"name":"A","value":"1"}]}}}`,
	`{"metadata":{"name":"v21"},"spec":{"runtimeRef":{"name":"torch"},"labels":{"a":"b"},"podTemplateOverrides":[{"targetJobs":[{"name":"node"}],"spec":{"nodeSelector":{"a":"b"},"containers":[{"name":"logger","env":[{"name":"X","value":"1"}]}]}}]}}`,
	`{"metadata":{"name":"v23"},"spec":{"runtimeRef":{"name":"torch"},"runtimePatches":[{"manager":"m","trainingRuntimeSpec":{"template":{"spec":{"replicatedJobs":[{"name":"node","template":{"spec":{"template":{"spec":{"containers":[{"name":"node","env":[{"name":"X"}]}]}}}}}]}}}}]}}`,
	`{"metadata":{"name":"env"},"spec":{"runtimeRef":{"name":"torch"},"trainer":{"env":[{"name":"PET_NNODES","value":"3"},{"name":"RANK"}]}}}`,
	`{"metadata":{"name":"n"},"spec":{"runtimeRef":{"name":"torch"},"trainer":{"numNodes":0,"numProcPerNode":"gpu"}}}`,
	`{"metadata":{"name":"n"},"spec":{"runtimeRef":{"name":"torch"},"trainer":{"numProcPerNode":-3,"resourcesPerNode":{"requests":{"cpu":"4"},"limits":{"cpu":"2"}}}}}`,
	`{"metadata":{"name":"7up"},"spec":{"runtimeRef":{"name":"torch","kind":"Deployment"},"managedBy":"x"}}`,
	`{"metadata":{"name":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},"spec":{"runtimeRef":{"name":"torch"}}}`,
	`{"metadata":{"name":"i"},"spec":{"runtimeRef":{"name":"torch"},"initializer":{"dataset":{"storageUri":"hf://x","secretRef":{"name":"s"}},"model":{"storageUri":"s3://y"}}}}`,
	`{"metadata":{"name":"o"},"spec":{"runtimeRef":{"name":"torch"},"podTemplateOverrides":[{"targetJobs":[{"name":"launcher"}]},{"targetJobs":[]}]}}`,
}

// same fails t when two runs of the same check disagree: validation and the
// pipeline are functions of their inputs (no map order, no clock).
func same(t *testing.T, what string, a, b any) {
	t.Helper()
	if diff := cmp.Diff(a, b); diff != "" {
		t.Fatalf("%s differs between two runs on the same input (-first +second):\n%s", what, diff)
	}
}

// errorStrings are the errors as the API server prints them.
func errorStrings(errs field.ErrorList) []string {
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

// FuzzValidateTrainJob: no TrainJob, old or new, may make validation panic;
// validation gives the same errors, in the same order, every time, and so
// does Build its objects, and neither changes the TrainJob.
func FuzzValidateTrainJob(f *testing.F) {
	for _, s := range trainJobSeeds {
		f.Add([]byte(s), []byte(trainJobSeeds[0]))
	}
	rt := rttesting.FuzzRuntime()
	fw, err := plugins.NewFramework()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, newJSON, oldJSON []byte) {
		var job, old trainer.TrainJob
		if json.Unmarshal(newJSON, &job) != nil {
			return
		}
		before := job.DeepCopy()
		check := func(what string, validate func() field.ErrorList) {
			same(t, what, errorStrings(validate()), errorStrings(validate()))
		}
		check("ValidateTrainJob on create", func() field.ErrorList { return ValidateTrainJob(nil, &job) })
		check("ValidateAgainstRuntime on create", func() field.ErrorList { return ValidateAgainstRuntime(fw, rt, &job) })
		if json.Unmarshal(oldJSON, &old) == nil {
			check("ValidateTrainJob on update", func() field.ErrorList { return ValidateTrainJob(&old, &job) })
			check("ValidateAgainstRuntime on update", func() field.ErrorList { return ValidateAgainstRuntime(fw, rt, &job) })
		}
		first, err1 := fw.Build(runtime.TrainJobRequest(&job), rt)
		second, err2 := fw.Build(runtime.TrainJobRequest(&job), rt)
		same(t, "Build's error", fmt.Sprint(err1), fmt.Sprint(err2))
		same(t, "Build's objects", first.Objects(), second.Objects())
		same(t, "the TrainJob after validation and Build", before, &job)
	})
}

// FuzzValidateRuntimeSpec: no runtime may make runtime validation panic;
// validation gives the same warnings and errors every time and changes nothing.
func FuzzValidateRuntimeSpec(f *testing.F) {
	f.Add([]byte(`{"template":{"spec":{"replicatedJobs":[{"name":"node","replicas":2,"template":{"metadata":{"labels":{"trainer.kubeflow.org/trainjob-ancestor-step":"trainer"}}}}]}}}`))
	f.Add([]byte(`{"mlPolicy":{"numNodes":0,"mpi":{},"torch":{"numProcPerNode":"auto"}},"template":{}}`))
	if b, err := yaml.YAMLToJSON([]byte(rttesting.FuzzRuntimeSpec)); err == nil {
		f.Add(b)
	}
	fw, err := plugins.NewFramework()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var spec trainer.TrainingRuntimeSpec
		if json.Unmarshal(data, &spec) != nil {
			return
		}
		before := spec.DeepCopy()
		warnings1, errs1 := ValidateRuntimeSpec(fw, &spec)
		warnings2, errs2 := ValidateRuntimeSpec(fw, &spec)
		same(t, "ValidateRuntimeSpec's warnings", warnings1, warnings2)
		same(t, "ValidateRuntimeSpec's errors", errorStrings(errs1), errorStrings(errs2))
		same(t, "the runtime after validation", before, &spec)
	})
}
