package pytorchjob

import (
	"errors"
	"flag"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
)

// quietManager is a fakeManager with a logger (the webhook setup logs).
type quietManager struct{ *fakeManager }

func (quietManager) GetLogger() logr.Logger { return logr.Discard() }

func TestKindSettings(t *testing.T) {
	k := NewKind()
	if k.Name() != "pytorchjob" || !k.Enabled() || len(k.Owned()) == 0 {
		t.Errorf("defaults: Name %q, Enabled %v, Owned %d kinds", k.Name(), k.Enabled(), len(k.Owned()))
	}
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	k.BindFlags(fs)
	if err := fs.Parse([]string{"--enable-pytorchjob=false", "--pytorchjob-concurrency=3", "--gang-scheduler-name=volcano"}); err != nil {
		t.Fatal(err)
	}
	if k.Enabled() {
		t.Error("--enable-pytorchjob=false left the kind enabled")
	}
	k.SetEnabled(true)
	if !k.Enabled() {
		t.Error("SetEnabled(true) left the kind disabled")
	}
	s := runtime.NewScheme()
	if err := k.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ObjectKinds(&kubeflowv1.PyTorchJob{}); err != nil {
		t.Error(err)
	}

	// Without the CRD the controller and webhooks are not started, but
	// the settings are checked and the metrics registered.
	s = runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	mgr := quietManager{&fakeManager{mapper: apimeta.NewDefaultRESTMapper(nil), client: fake.NewClientBuilder().WithScheme(s).Build()}}
	reg := prometheus.NewRegistry()
	m := jobframework.NewManager(mgr, reg)
	if err := k.SetupWithManager(m); err != nil {
		t.Fatal(err)
	}
	if err := k.SetupWebhooks(m); err != nil {
		t.Fatal(err)
	}
	want := Options{MaxConcurrentReconciles: 3, GangScheduler: GangVolcano}
	if diff := cmp.Diff(want, k.Options); diff != "" {
		t.Errorf("options (-want +got):\n%s", diff)
	}
	var dup prometheus.AlreadyRegisteredError
	if err := NewMetrics().Register(reg); !errors.As(err, &dup) {
		t.Errorf("registering the PyTorchJob metrics again: %v, want AlreadyRegistered", err)
	}
}

func TestKindBadGangScheduler(t *testing.T) {
	k := NewKind()
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	k.BindFlags(fs)
	if err := fs.Parse([]string{"--gang-scheduler-name=yunikorn"}); err != nil {
		t.Fatal(err)
	}
	err := k.SetupWithManager(jobframework.NewManager(nil, nil))
	if err == nil || !strings.Contains(err.Error(), `--gang-scheduler-name: unknown gang scheduler "yunikorn"`) {
		t.Fatalf("error %v, want the bad --gang-scheduler-name", err)
	}
}
