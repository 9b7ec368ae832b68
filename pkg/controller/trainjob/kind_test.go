package trainjob

import (
	"context"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
	"github.com/trainyard/trainyard/pkg/runtime"
	rtt "github.com/trainyard/trainyard/test/util/rtt"
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
	m := jobframework.NewManager(nil, nil)
	fw, err := k.Framework(m)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := k.Framework(m); again != fw {
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

// kindManager is the part of a manager the TrainJob kind's setup uses
// before the controller is built; anything else panics (nil Manager).
type kindManager struct {
	ctrl.Manager
	client  client.Client
	indexer client.FieldIndexer
	mapper  apimeta.RESTMapper
}

func (m kindManager) GetClient() client.Client             { return m.client }
func (m kindManager) GetScheme() *k8sruntime.Scheme        { return m.client.Scheme() }
func (m kindManager) GetFieldIndexer() client.FieldIndexer { return m.indexer }
func (m kindManager) GetRESTMapper() apimeta.RESTMapper    { return m.mapper }

type indexer struct{ err error }

func (i indexer) IndexField(context.Context, client.Object, string, client.IndexerFunc) error {
	return i.err
}

// lookupFails fails every lookup of the API.
type lookupFails struct{ apimeta.RESTMapper }

func (lookupFails) RESTMapping(schema.GroupKind, ...string) (*apimeta.RESTMapping, error) {
	return nil, errors.New("discovery failed")
}

// The setup's errors come back with what failed: the runtime index, the
// cluster's API (here before the controller is built).
func TestKindSetupErrors(t *testing.T) {
	s := k8sruntime.NewScheme()
	if err := NewKind().AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(s).Build()
	cases := map[string]struct {
		mgr     kindManager
		wantErr string
	}{
		"indexing TrainJobs by runtime fails": {
			mgr:     kindManager{client: c, indexer: indexer{err: errors.New("no index")}},
			wantErr: "no index",
		},
		"the API cannot be read": {
			mgr:     kindManager{client: c, indexer: indexer{}, mapper: lookupFails{apimeta.NewDefaultRESTMapper(nil)}},
			wantErr: "discovery failed",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := NewKind().SetupWithManager(jobframework.NewManager(tc.mgr, nil))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("SetupWithManager error %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestFrameworkTakesTheManagersSettings: the cluster's DNS domain and the
// status server's URL come from the manager the kind is set up on, the one
// place the manager's command puts them.
func TestFrameworkTakesTheManagersSettings(t *testing.T) {
	m := jobframework.NewManager(nil, nil)
	m.ClusterDomain, m.StatusServerURL = "corp.example", "https://status.example:10443"
	fw, err := NewKind().Framework(m)
	if err != nil {
		t.Fatal(err)
	}
	rt := rtt.MakeTorchRuntime("torch").MLPolicy(&trainer.MLPolicy{MLPolicySource: trainer.MLPolicySource{
		Torch: &trainer.TorchMLPolicySource{ElasticPolicy: &trainer.TorchElasticPolicy{}},
	}}).Obj()
	p, err := fw.Build(runtime.TrainJobRequest(rtt.MakeTrainJob("ns", "job").NumNodes(2).Obj()), rt)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, e := range runtime.TrainerContainer(&p.JobSet().Spec).Env {
		env[e.Name] = e.Value
	}
	if got := env["PET_RDZV_ENDPOINT"]; !strings.Contains(got, ".svc.corp.example:") {
		t.Errorf("PET_RDZV_ENDPOINT %q, want the manager's cluster domain", got)
	}
	if got := env["KUBEFLOW_TRAINER_SERVER_URL"]; !strings.HasPrefix(got, m.StatusServerURL+"/") {
		t.Errorf("KUBEFLOW_TRAINER_SERVER_URL %q, want the manager's status server", got)
	}
}
