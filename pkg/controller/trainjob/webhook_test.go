package trainjob

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// nodeSelectorPatch is a runtime patch by manager that puts the trainer's
// pods in zone, stamped at t (nil: unstamped).
func nodeSelectorPatch(manager, zone string, t *metav1.Time) trainer.RuntimePatch {
	return trainer.RuntimePatch{
		Manager: manager,
		Time:    t,
		TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{
			ReplicatedJobs: []trainer.ReplicatedJobPatch{{Name: "node", Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{
				Template: &trainer.PodTemplatePatch{Spec: &trainer.PodSpecPatch{NodeSelector: map[string]string{"zone": zone}}},
			}}}},
		}}},
	}
}

// admissionContext is the context the webhook server hands a defaulter: the
// request, with the old object on update (old nil: a create).
func admissionContext(t *testing.T, old runtime.Object) context.Context {
	t.Helper()
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create}}
	if old != nil {
		raw, err := json.Marshal(old)
		if err != nil {
			t.Fatal(err)
		}
		req.Operation, req.OldObject.Raw = admissionv1.Update, raw
	}
	return admission.NewContextWithRequest(context.Background(), req)
}

func TestTrainJobDefaulterRuntimePatchTimes(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 700_000_000, time.UTC)
	stamped := metav1.NewTime(now.Truncate(time.Second))
	oldTime := metav1.NewTime(now.Add(-time.Hour).Truncate(time.Second))
	clientTime := metav1.NewTime(now.Add(-30 * time.Minute).Truncate(time.Second))
	otherTime := metav1.NewTime(now.Add(-10 * time.Minute).Truncate(time.Second))

	cases := map[string]struct {
		old  []trainer.RuntimePatch // nil: a create
		sent []trainer.RuntimePatch
		want []trainer.RuntimePatch
	}{
		"create: a patch without time gets now": {
			sent: []trainer.RuntimePatch{nodeSelectorPatch("kueue.x-k8s.io/manager", "a", nil)},
			want: []trainer.RuntimePatch{nodeSelectorPatch("kueue.x-k8s.io/manager", "a", &stamped)},
		},
		"create: a time the client set is kept": {
			sent: []trainer.RuntimePatch{
				nodeSelectorPatch("test.io/manager-one", "a", &clientTime),
				nodeSelectorPatch("kueue.x-k8s.io/manager", "b", nil),
			},
			want: []trainer.RuntimePatch{
				nodeSelectorPatch("test.io/manager-one", "a", &clientTime),
				nodeSelectorPatch("kueue.x-k8s.io/manager", "b", &stamped),
			},
		},
		"update: an unchanged patch keeps its old time": {
			old:  []trainer.RuntimePatch{nodeSelectorPatch("test.io/unchanged", "keep", &oldTime)},
			sent: []trainer.RuntimePatch{nodeSelectorPatch("test.io/unchanged", "keep", &oldTime)},
			want: []trainer.RuntimePatch{nodeSelectorPatch("test.io/unchanged", "keep", &oldTime)},
		},
		"update: an unchanged patch gets its old time back over the one the client sent": {
			old:  []trainer.RuntimePatch{nodeSelectorPatch("test.io/unchanged", "keep", &oldTime)},
			sent: []trainer.RuntimePatch{nodeSelectorPatch("test.io/unchanged", "keep", &otherTime)},
			want: []trainer.RuntimePatch{nodeSelectorPatch("test.io/unchanged", "keep", &oldTime)},
		},
		"update: an unchanged patch whose time the client dropped gets it back": {
			old:  []trainer.RuntimePatch{nodeSelectorPatch("test.io/unchanged", "keep", &oldTime)},
			sent: []trainer.RuntimePatch{nodeSelectorPatch("test.io/unchanged", "keep", nil)},
			want: []trainer.RuntimePatch{nodeSelectorPatch("test.io/unchanged", "keep", &oldTime)},
		},
		"update: a changed patch gets now even though the client sent its old time": {
			old:  []trainer.RuntimePatch{nodeSelectorPatch("test.io/will-change", "old", &clientTime)},
			sent: []trainer.RuntimePatch{nodeSelectorPatch("test.io/will-change", "new", &clientTime)},
			want: []trainer.RuntimePatch{nodeSelectorPatch("test.io/will-change", "new", &stamped)},
		},
		"update: a changed patch gets now even though the client sent another time": {
			old:  []trainer.RuntimePatch{nodeSelectorPatch("test.io/will-change", "old", &oldTime)},
			sent: []trainer.RuntimePatch{nodeSelectorPatch("test.io/will-change", "new", &otherTime)},
			want: []trainer.RuntimePatch{nodeSelectorPatch("test.io/will-change", "new", &stamped)},
		},
		"update: only the changed patch is restamped; new managers keep a client time or get now": {
			old: []trainer.RuntimePatch{
				nodeSelectorPatch("test.io/unchanged", "keep", &oldTime),
				nodeSelectorPatch("test.io/will-change", "old", &clientTime),
			},
			sent: []trainer.RuntimePatch{
				nodeSelectorPatch("test.io/unchanged", "keep", &oldTime),
				nodeSelectorPatch("test.io/will-change", "new", &clientTime),
				{Manager: "test.io/new-no-time"},
				{Manager: "test.io/new-with-time", Time: &otherTime},
			},
			want: []trainer.RuntimePatch{
				nodeSelectorPatch("test.io/unchanged", "keep", &oldTime),
				nodeSelectorPatch("test.io/will-change", "new", &stamped),
				{Manager: "test.io/new-no-time", Time: &stamped},
				{Manager: "test.io/new-with-time", Time: &otherTime},
			},
		},
		"update: a manager that left is forgotten": {
			old:  []trainer.RuntimePatch{nodeSelectorPatch("test.io/gone", "a", &oldTime)},
			sent: []trainer.RuntimePatch{nodeSelectorPatch("test.io/other", "a", nil)},
			want: []trainer.RuntimePatch{nodeSelectorPatch("test.io/other", "a", &stamped)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var old runtime.Object
			if tc.old != nil {
				old = &trainer.TrainJob{Spec: trainer.TrainJobSpec{RuntimePatches: tc.old}}
			}
			job := &trainer.TrainJob{Spec: trainer.TrainJobSpec{RuntimePatches: tc.sent}}
			d := &Defaulter{Clock: clocktesting.NewFakePassiveClock(now)}
			if err := d.Default(admissionContext(t, old), job); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, job.Spec.RuntimePatches); diff != "" {
				t.Errorf("runtimePatches (-want +got):\n%s", diff)
			}
		})
	}
}
