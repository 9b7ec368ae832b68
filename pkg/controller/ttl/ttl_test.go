package ttl

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestRemaining(t *testing.T) {
	done := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cases := map[string]struct {
		ttl        *int32
		completion *metav1.Time
		now        time.Time
		want       time.Duration
	}{
		"no TTL":       {nil, &done, done.Add(time.Hour), 0},
		"not finished": {ptr.To[int32](60), nil, done.Time, 0},
		"time left":    {ptr.To[int32](60), &done, done.Add(20 * time.Second), 40 * time.Second},
		"due":          {ptr.To[int32](60), &done, done.Add(time.Minute), 0},
		"overdue":      {ptr.To[int32](0), &done, done.Add(time.Hour), 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Remaining(tc.ttl, tc.completion, tc.now)); diff != "" {
				t.Errorf("Remaining (-want +got):\n%s", diff)
			}
		})
	}
}

// Expire deletes only when due; any object kind works (a ConfigMap stands in).
func TestExpire(t *testing.T) {
	done := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job", UID: "u1"}}

	del, left := Expire(obj, ptr.To[int32](30), &done, done.Add(10*time.Second))
	if del != nil || left != 20*time.Second {
		t.Fatalf("before the TTL: delete %v, left %v; want nothing, 20s", del, left)
	}
	del, left = Expire(obj, ptr.To[int32](30), &done, done.Add(30*time.Second))
	if del != obj || left != 0 {
		t.Fatalf("at the TTL: delete %v, left %v; want the job, 0", del, left)
	}
	if del, left := Expire(obj, nil, &done, done.Add(time.Hour)); del != nil || left != 0 {
		t.Fatalf("without a TTL: delete %v, left %v; want nothing, 0", del, left)
	}
	if del, left := Expire(obj, ptr.To[int32](0), nil, done.Add(time.Hour)); del != nil || left != 0 {
		t.Fatalf("not finished: delete %v, left %v; want nothing, 0", del, left)
	}
}
