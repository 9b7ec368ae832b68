package trainjob

import (
	"context"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
)

// tj is a TrainJob on a runtime: running (it has a JobSet and a phase), or
// waiting with Created=False (RuntimeNotFound).
func tj(ns, name, kind, runtime string, running bool) *trainer.TrainJob {
	j := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: runtime, Kind: ptr.To(kind)}},
	}
	if running {
		j.Status.Phase = trainer.TrainJobRunning
	} else {
		j.Status.Phase = trainer.TrainJobPending
		j.Status.Conditions = []metav1.Condition{{Type: trainer.TrainJobCreated, Status: metav1.ConditionFalse, Reason: trainer.TrainJobRuntimeNotFound}}
	}
	return j
}

// A runtime event wakes the TrainJobs that refer to it and have no JobSet
// yet: of that kind, that name, and (for a namespaced runtime) that namespace.
func TestRuntimeToTrainJobs(t *testing.T) {
	scheme := k8sruntime.NewScheme()
	if err := trainer.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).
		WithIndex(&trainer.TrainJob{}, runtimeRefIndex, func(o client.Object) []string { return runtimeRefKey(o.(*trainer.TrainJob)) }).
		WithObjects(
			tj("a", "waiting", trainer.ClusterTrainingRuntimeKind, "torch", false),
			tj("b", "waiting-too", trainer.ClusterTrainingRuntimeKind, "torch", false),
			tj("a", "running", trainer.ClusterTrainingRuntimeKind, "torch", true),
			tj("a", "other-runtime", trainer.ClusterTrainingRuntimeKind, "jax", false),
			tj("a", "namespaced", trainer.TrainingRuntimeKind, "torch", false),
			tj("b", "namespaced-elsewhere", trainer.TrainingRuntimeKind, "torch", false),
			tj("a", "bad-kind", "Job", "torch", false),
			&trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "new"},
				Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "torch"}}},
		).Build()
	names := func(kind string, o client.Object) []string {
		var out []string
		for _, r := range runtimeToTrainJobs(c, kind)(context.Background(), o) {
			out = append(out, r.Namespace+"/"+r.Name)
		}
		return out
	}
	ctr := &trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "torch"}}
	if diff := cmp.Diff([]string{"a/new", "a/waiting", "b/waiting-too"}, names(trainer.ClusterTrainingRuntimeKind, ctr)); diff != "" {
		t.Errorf("ClusterTrainingRuntime torch wakes (-want +got):\n%s", diff)
	}
	tr := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "torch"}}
	if diff := cmp.Diff([]string{"a/namespaced"}, names(trainer.TrainingRuntimeKind, tr)); diff != "" {
		t.Errorf("TrainingRuntime a/torch wakes (-want +got):\n%s", diff)
	}
	if got := runtimeRefKey(tj("a", "x", "Job", "torch", false)); got != nil {
		t.Errorf("runtimeRefKey of an unsupported kind = %v, want none", got)
	}
}

func TestKindSettings(t *testing.T) {
	k := NewKind()
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	k.BindFlags(fs)
	if err := fs.Parse([]string{"--trainjob-concurrency=7", "--status-write-delay=2s", "--counts-write-delay=0", "--kueue-mode=jobset"}); err != nil {
		t.Fatal(err)
	}
	want := jobframework.Options{MaxConcurrentReconciles: 7, Delays: jobframework.Delays{StatusDelay: 2 * time.Second}}
	if diff := cmp.Diff(want, k.Options); diff != "" {
		t.Errorf("options (-want +got):\n%s", diff)
	}
	fw, err := k.Framework()
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := k.Framework(); again != fw {
		t.Error("Framework built the pipeline twice")
	}
	if got := fw.Names(); len(got) == 0 || got[len(got)-1] != "JobSet" {
		t.Errorf("plugins %v: want Trainyard's, JobSet last", got)
	}
	if k.Name() != "trainjob" || !k.Enabled() || len(k.Owned()) == 0 {
		t.Errorf("Name %q, Enabled %v, Owned %d kinds", k.Name(), k.Enabled(), len(k.Owned()))
	}
	s := k8sruntime.NewScheme()
	if err := k.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{&trainer.TrainJob{}, &trainer.ClusterTrainingRuntime{}, &jobsetv1alpha2.JobSet{}} {
		if _, _, err := s.ObjectKinds(o); err != nil {
			t.Errorf("scheme: %v", err)
		}
	}
}

// A bad --kueue-mode fails the kind's setup before it touches the manager.
func TestKindBadKueueMode(t *testing.T) {
	k := NewKind()
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	k.BindFlags(fs)
	if err := fs.Parse([]string{"--kueue-mode=both"}); err != nil {
		t.Fatal(err)
	}
	m := jobframework.NewManager(nil, nil)
	for name, setup := range map[string]func(*jobframework.Manager) error{"controller": k.SetupWithManager, "webhooks": k.SetupWebhooks} {
		if err := setup(m); err == nil || !strings.Contains(err.Error(), `--kueue-mode: unknown Kueue mode "both"`) {
			t.Errorf("%s setup error %v, want the bad --kueue-mode", name, err)
		}
	}
}
