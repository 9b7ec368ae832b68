package trainjob

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime/plugins"
	"github.com/trainyard/trainyard/pkg/validation"
	rttesting "github.com/trainyard/trainyard/test/util/rtt"
)

var defaultSeeds = []string{
	`{"metadata":{"name":"a"},"spec":{"runtimeRef":{"name":"torch"},"runtimePatches":[{"manager":"m","trainingRuntimeSpec":{"template":{"metadata":{"labels":{"a":"b"}}}}}]}}`,
	`{"metadata":{"name":"a"},"spec":{"runtimeRef":{"name":"torch"},"suspend":true,"runtimePatches":[{"manager":"m","time":"2026-01-02T03:04:05Z","trainingRuntimeSpec":{"template":{"spec":{"replicatedJobs":[{"name":"node","template":{"spec":{"template":{"spec":{"containers":[{"name":"node","env":[{"name":"X"}]}]}}}}}]}}}},{"manager":"k","trainingRuntimeSpec":{"template":{"spec":{"replicatedJobs":[{"name":"ghost"}]}}}}]}}`,
	`{"metadata":{"name":"a"},"spec":{"runtimeRef":{"name":"torch"},"runtimePatches":[{"manager":"m","time":"2026-01-02T03:04:05Z"},{"manager":"m"}]}}`,
	`{"metadata":{"name":"a"},"spec":{"runtimeRef":{"name":"torch"},"labels":{"a":"b"},"podTemplateOverrides":[{"targetJobs":[{"name":"node"}]}]}}`,
}

// errorKeys are the errors without their values: a value may print a whole
// patch, time included.
func errorKeys(errs field.ErrorList) []string {
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, fmt.Sprintf("%s %s: %s", e.Type, e.Field, e.Detail))
	}
	return out
}

// FuzzDefaultTrainJob: defaulting a TrainJob (create, or update from an old
// TrainJob) is idempotent, changes nothing but runtimePatches[].time, and so
// neither fixes nor breaks anything validation checks: validation reads no
// patch time (patches apply in list order; the update rules compare patches
// without their times), so it finds the same errors before and after.
func FuzzDefaultTrainJob(f *testing.F) {
	for i, s := range defaultSeeds {
		f.Add([]byte(s), []byte(defaultSeeds[(i+1)%len(defaultSeeds)]), int64(1_800_000_000))
		f.Add([]byte(s), []byte(""), int64(0))
	}
	rt := rttesting.FuzzRuntime()
	fw, err := plugins.NewFramework()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, newJSON, oldJSON []byte, unix int64) {
		var job trainer.TrainJob
		if json.Unmarshal(newJSON, &job) != nil {
			return
		}
		req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create}}
		var old *trainer.TrainJob
		if o := (trainer.TrainJob{}); json.Unmarshal(oldJSON, &o) == nil {
			old = &o
			req.Operation, req.OldObject.Raw = admissionv1.Update, oldJSON
		}
		ctx := admission.NewContextWithRequest(t.Context(), req)
		d := &Defaulter{Clock: clocktesting.NewFakePassiveClock(time.Unix(unix%(1<<34), 0))}

		once := job.DeepCopy()
		if err := d.Default(ctx, once); err != nil {
			return // an old object Default cannot read
		}
		twice := once.DeepCopy()
		if err := d.Default(ctx, twice); err != nil {
			t.Fatalf("second Default: %v", err)
		}
		if diff := cmp.Diff(once, twice); diff != "" {
			t.Fatalf("Default is not idempotent (-once +twice):\n%s", diff)
		}
		untimed := func(j *trainer.TrainJob) *trainer.TrainJob {
			j = j.DeepCopy()
			for i := range j.Spec.RuntimePatches {
				j.Spec.RuntimePatches[i].Time = nil
			}
			return j
		}
		if diff := cmp.Diff(untimed(&job), untimed(once)); diff != "" {
			t.Fatalf("Default changed more than runtimePatches[].time (-before +after):\n%s", diff)
		}
		for i, p := range once.Spec.RuntimePatches {
			if p.Time == nil && (old == nil || len(old.Spec.RuntimePatches) == 0) {
				t.Fatalf("runtimePatches[%d] (manager %q) has no time after Default on %s", i, p.Manager, req.Operation)
			}
		}
		before := errorKeys(append(validation.ValidateTrainJob(old, &job), validation.ValidateAgainstRuntime(fw, rt, &job)...))
		after := errorKeys(append(validation.ValidateTrainJob(old, once), validation.ValidateAgainstRuntime(fw, rt, once)...))
		if diff := cmp.Diff(before, after); diff != "" {
			t.Fatalf("Default changed what validation finds (-before +after):\n%s", diff)
		}
	})
}
