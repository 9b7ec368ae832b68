package plan

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

func TestChildConstructors(t *testing.T) {
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "js"}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ssh"}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hosts"}}
	cases := map[string]struct {
		got  Child
		want Child
	}{
		"JobSet":              {JobSet(js), Child{Object: js, Rule: RuleJobSet}},
		"CreateOnce":          {CreateOnce(secret), Child{Object: secret, Rule: RuleCreateOnce}},
		"Apply":               {Apply(cm), Child{Object: cm, Rule: RuleApply}},
		"ApplyWhileSuspended": {ApplyWhileSuspended(cm), Child{Object: cm, Rule: RuleApplyWhileSuspended}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.got); diff != "" {
				t.Errorf("child (-want +got):\n%s", diff)
			}
			if tc.got.Object != tc.want.Object {
				t.Errorf("child object is a copy, want the same pointer")
			}
		})
	}
}

func TestPlan(t *testing.T) {
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "js"}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "svc"}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hosts"}}
	cases := map[string]struct {
		plan        *Plan
		wantObjects []client.Object
		wantJobSet  *jobsetv1alpha2.JobSet
	}{
		"nil plan": {
			plan:        nil,
			wantObjects: nil,
		},
		"empty plan": {
			plan:        &Plan{},
			wantObjects: []client.Object{},
		},
		"no JobSet": {
			plan:        &Plan{Children: []Child{Apply(cm), Apply(svc)}},
			wantObjects: []client.Object{cm, svc},
		},
		"JobSet after the others": {
			plan:        &Plan{Children: []Child{Apply(svc), CreateOnce(cm), JobSet(js)}, Suspended: true},
			wantObjects: []client.Object{svc, cm, js},
			wantJobSet:  js,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.wantObjects, tc.plan.Objects()); diff != "" {
				t.Errorf("Objects (-want +got):\n%s", diff)
			}
			if tc.plan == nil {
				return
			}
			if got := tc.plan.JobSet(); got != tc.wantJobSet {
				t.Errorf("JobSet = %v, want %v", got, tc.wantJobSet)
			}
		})
	}
}

func TestAddKeepsOrder(t *testing.T) {
	a := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	b := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "b"}}
	c := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "c"}}
	var p Plan
	p.Add(Apply(a))
	p.Add()
	p.Add(CreateOnce(b), JobSet(c))
	want := []Child{{Object: a, Rule: RuleApply}, {Object: b, Rule: RuleCreateOnce}, {Object: c, Rule: RuleJobSet}}
	if diff := cmp.Diff(want, p.Children); diff != "" {
		t.Errorf("children (-want +got):\n%s", diff)
	}
}
