package observe

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/trainyard/trainyard/pkg/childsync"
)

func TestJobSet(t *testing.T) {
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "job", UID: "js-uid"}}
	other := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "other"}}
	// A child of another kind under the JobSet's name is not the JobSet.
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "job"}}
	svcKind := schema.GroupKind{Kind: "Service"}
	cases := map[string]struct {
		obs  *Observed
		name string
		want *jobsetv1alpha2.JobSet
	}{
		"nil observed": {obs: nil, name: "job"},
		"no children":  {obs: &Observed{}, name: "job"},
		"found": {
			obs: &Observed{Children: childsync.Children{
				{GroupKind: JobSetKind, Name: "job"}:   js,
				{GroupKind: JobSetKind, Name: "other"}: other,
			}},
			name: "job",
			want: js,
		},
		"other name": {
			obs:  &Observed{Children: childsync.Children{{GroupKind: JobSetKind, Name: "other"}: other}},
			name: "job",
		},
		"same name, other kind": {
			obs:  &Observed{Children: childsync.Children{{GroupKind: svcKind, Name: "job"}: svc}},
			name: "job",
		},
		"JobSet key holding another type": {
			obs:  &Observed{Children: childsync.Children{{GroupKind: JobSetKind, Name: "job"}: svc}},
			name: "job",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.obs.JobSet(tc.name); got != tc.want {
				t.Errorf("JobSet(%q) = %v, want %v", tc.name, got, tc.want)
			}
		})
	}
}

func TestJobSetKind(t *testing.T) {
	want := schema.GroupKind{Group: "jobset.x-k8s.io", Kind: "JobSet"}
	if diff := cmp.Diff(want, JobSetKind); diff != "" {
		t.Errorf("JobSetKind (-want +got):\n%s", diff)
	}
}

func TestPodsOf(t *testing.T) {
	pod := func(name, uid, rjob string) corev1.Pod {
		labels := map[string]string{}
		if uid != "" {
			labels[jobsetv1alpha2.JobSetUIDKey] = uid
		}
		if rjob != "" {
			labels[jobsetv1alpha2.ReplicatedJobNameKey] = rjob
		}
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	deleted := pod("node-1-deleted", "u1", "node")
	deleted.DeletionTimestamp = &metav1.Time{}
	pods := []corev1.Pod{
		pod("launcher-0", "u1", "launcher"),
		pod("node-0", "u1", "node"),
		deleted,
		pod("old-node-0", "u0", "node"), // an earlier JobSet of the same name
		pod("stray", "", ""),
	}
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Name: "job", UID: "u1"}}
	names := func(ps []corev1.Pod) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return out
	}
	cases := map[string]struct {
		obs  *Observed
		js   *jobsetv1alpha2.JobSet
		rjob string
		want []string
	}{
		"nil observed":           {obs: nil, js: js},
		"nil JobSet":             {obs: &Observed{Pods: pods}, js: nil},
		"all of the JobSet":      {obs: &Observed{Pods: pods}, js: js, want: []string{"launcher-0", "node-0", "node-1-deleted"}},
		"one replicated job":     {obs: &Observed{Pods: pods}, js: js, rjob: "node", want: []string{"node-0", "node-1-deleted"}},
		"unknown replicated job": {obs: &Observed{Pods: pods}, js: js, rjob: "nope"},
		"no pods":                {obs: &Observed{}, js: js},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, names(tc.obs.PodsOf(tc.js, tc.rjob))); diff != "" {
				t.Errorf("PodsOf (-want +got):\n%s", diff)
			}
		})
	}
}
