package jobframework

import (
	"encoding/json"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// statusPatch, made from the two statuses alone, turns the old object into
// the updated one when only the status changed, as a merge patch of the
// whole objects does.
func TestStatusPatch(t *testing.T) {
	cond := func(typ string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: typ, Message: "m", LastTransitionTime: metav1.Unix(1, 0)}
	}
	base := func(mutate func(*trainer.TrainJob)) *trainer.TrainJob {
		j := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job", ResourceVersion: "7",
			Labels: map[string]string{"a": "b"}}}
		j.Spec.Suspend = ptr.To(false)
		j.Status.Conditions = []metav1.Condition{cond("Created")}
		j.Status.JobsStatus = []trainer.JobStatus{{Name: "node", Active: ptr.To[int32](2)}}
		if mutate != nil {
			mutate(j)
		}
		return j
	}
	for name, mutate := range map[string]func(*trainer.TrainJob){
		"a condition added": func(j *trainer.TrainJob) {
			j.Status.Conditions = append(j.Status.Conditions, cond("Complete"))
		},
		"a count changed": func(j *trainer.TrainJob) {
			j.Status.JobsStatus[0].Active = ptr.To[int32](0)
			j.Status.JobsStatus[0].Succeeded = ptr.To[int32](2)
		},
		"a field removed":    func(j *trainer.TrainJob) { j.Status.JobsStatus = nil },
		"everything removed": func(j *trainer.TrainJob) { j.Status = trainer.TrainJobStatus{} },
	} {
		t.Run(name, func(t *testing.T) {
			old, updated := base(nil), base(mutate)
			patch, err := statusPatch(old, updated)
			if err != nil {
				t.Fatal(err)
			}
			oldJSON, err := json.Marshal(old)
			if err != nil {
				t.Fatal(err)
			}
			got, err := jsonpatch.MergePatch(oldJSON, patch)
			if err != nil {
				t.Fatal(err)
			}
			var patched trainer.TrainJob
			if err := json.Unmarshal(got, &patched); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(updated, &patched); diff != "" {
				t.Errorf("old patched with %s (-want +got):\n%s", patch, diff)
			}
		})
	}
}
