package harness

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

func trainJob(uid, phase string, suspend bool, conds map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"suspend": suspend}}}
	u.SetName("j")
	u.SetUID(types.UID(uid))
	var cs []any
	for t, s := range conds {
		cs = append(cs, map[string]any{"type": t, "status": s})
	}
	u.Object["status"] = map[string]any{"phase": phase, "conditions": cs}
	return u
}

// The watcher's record is what the chaos run judges; a regression or a second
// UID must show.
func TestWatcherRecords(t *testing.T) {
	w := &Watcher{objs: map[string]*Seen{}, changed: make(chan struct{}, 1)}
	w.observe(trainJob("a", "Pending", true, map[string]string{"Created": "True"}))
	w.observe(trainJob("a", "Pending", false, map[string]string{"Created": "True"}))
	w.observe(trainJob("a", "Running", false, map[string]string{"Created": "True"}))
	w.observe(trainJob("a", "Pending", false, map[string]string{"Created": "False"}))
	w.observe(trainJob("b", "Complete", false, map[string]string{"Created": "True", "Complete": "True"}))
	s, ok := w.Get("j")
	if !ok {
		t.Fatal("not recorded")
	}
	got := struct {
		Phases, Conditions, Regressions []string
		UIDs                            int
		Final                           string
		Running, Finished               bool
	}{s.Phases, s.Conditions, s.Regressions, len(s.UIDs), s.Final, !s.Running.IsZero(), !s.Finished.IsZero()}
	want := got
	want.Phases = []string{"Pending", "Running", "Pending", "Complete"}
	want.Conditions = []string{"Created", "Complete"}
	want.Regressions = []string{"Created"}
	want.UIDs, want.Final, want.Running, want.Finished = 2, "Complete", true, true
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("record (-want +got):\n%s", diff)
	}
}

func TestPercentiles(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	got := Percentiles(ds, 50, 95, 99, 100)
	want := []time.Duration{50 * time.Millisecond, 95 * time.Millisecond, 99 * time.Millisecond, 100 * time.Millisecond}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Percentiles (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]time.Duration{0}, Percentiles(nil, 50)); diff != "" {
		t.Errorf("Percentiles(nil) (-want +got):\n%s", diff)
	}
}

func TestAuditEvent(t *testing.T) {
	e := AuditEvent{Verb: "patch", UserAgent: "trainyard-manager/v0.0.0 (linux/amd64) kubernetes/$Format"}
	e.ObjectRef = &struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
	}{Resource: "trainjobs", Subresource: "status", Name: "j"}
	if !e.From("trainyard-manager") || e.From("trainyard") || !e.IsWrite() || e.Resource() != "trainjobs/status" {
		t.Errorf("classification of %+v is wrong", e)
	}
}
