package observe_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/trainyard/trainyard/pkg/observe"
)

// TestFinished: the first True terminal condition of the JobSet, the one rule
// every job kind's status follows.
func TestFinished(t *testing.T) {
	cond := func(t jobsetv1alpha2.JobSetConditionType, s metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: string(t), Status: s, Reason: string(t) + "Reason"}
	}
	cases := map[string]struct {
		conds  []metav1.Condition
		want   string
		wantOK bool
	}{
		"running":                 {conds: []metav1.Condition{cond(jobsetv1alpha2.JobSetStartupPolicyCompleted, metav1.ConditionTrue)}},
		"completed":               {conds: []metav1.Condition{cond(jobsetv1alpha2.JobSetCompleted, metav1.ConditionTrue)}, want: "Completed", wantOK: true},
		"failed, completed False": {conds: []metav1.Condition{cond(jobsetv1alpha2.JobSetCompleted, metav1.ConditionFalse), cond(jobsetv1alpha2.JobSetFailed, metav1.ConditionTrue)}, want: "Failed", wantOK: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			js := &jobsetv1alpha2.JobSet{Status: jobsetv1alpha2.JobSetStatus{Conditions: tc.conds}}
			f, ok := observe.Finished(js)
			if ok != tc.wantOK || (ok && f.Reason != tc.want+"Reason") || f.Failed != (tc.want == "Failed") {
				t.Errorf("Finished = %+v, %v; want %q, %v", f, ok, tc.want, tc.wantOK)
			}
		})
	}
	if _, ok := observe.Finished(nil); ok {
		t.Error("Finished(nil) = true")
	}
}
