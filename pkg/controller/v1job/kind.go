package v1job

import (
	"flag"
	"fmt"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/cli/view"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
)

// Kind is a kubeflow.org/v1 kind as a jobframework.Kind: its settings are
// its own flags, --enable-<kind> and --<kind>-concurrency.
type Kind struct {
	Def *Def
	// MaxConcurrentReconciles is the number of jobs reconciled at once.
	MaxConcurrentReconciles int
	// Clock decides deadlines and TTLs; the real clock when nil.
	Clock clock.PassiveClock
	// Webhooks registers the kind's webhooks (SetupWebhooks with its type).
	Webhooks func(ctrl.Manager) error

	enabled bool
}

var (
	_ jobframework.Kind    = (*Kind)(nil)
	_ jobframework.Charted = (*Kind)(nil)
	_ view.Provider        = (*Kind)(nil)
)

// NewKind returns the kind of d with its defaults: enabled, 20 jobs at once.
func NewKind(d *Def, webhooks func(ctrl.Manager) error) *Kind {
	return &Kind{Def: d, MaxConcurrentReconciles: defaultConcurrency, Webhooks: webhooks, enabled: true}
}

// Name implements jobframework.Kind.
func (k *Kind) Name() string { return k.Def.Name }

// AddToScheme implements jobframework.Kind.
func (*Kind) AddToScheme(s *k8sruntime.Scheme) error {
	if err := kubeflowv1.AddToScheme(s); err != nil {
		return err
	}
	return jobsetv1alpha2.AddToScheme(s)
}

// BindFlags implements jobframework.Kind.
func (k *Kind) BindFlags(fs *flag.FlagSet) {
	d := k.Def
	fs.BoolVar(&k.enabled, "enable-"+d.Name, k.enabled, fmt.Sprintf("run kubeflow.org/v1 %ss (needs the %s.kubeflow.org CRD); false registers no %s controller, webhook or metric", d.Kind, d.Resource, d.Kind))
	fs.IntVar(&k.MaxConcurrentReconciles, d.Name+"-concurrency", k.MaxConcurrentReconciles, d.Kind+"s reconciled in parallel")
}

// Validate implements jobframework.Kind: 0 concurrency is the default
// (the chart's), a negative one an error.
func (k *Kind) Validate() error {
	switch {
	case k.MaxConcurrentReconciles < 0:
		return fmt.Errorf("--%s-concurrency %d: must not be negative", k.Def.Name, k.MaxConcurrentReconciles)
	case k.MaxConcurrentReconciles == 0:
		k.MaxConcurrentReconciles = defaultConcurrency
	}
	return nil
}

// defaultConcurrency is the number of jobs of a kind reconciled at once.
const defaultConcurrency = 20

// SetEnabled turns the kind on or off, as --enable-<kind> does.
func (k *Kind) SetEnabled(on bool) { k.enabled = on }

// Enabled implements jobframework.Kind.
func (k *Kind) Enabled() bool { return k.enabled }

// Chart implements jobframework.Charted: the chart's value of the kind.
func (k *Kind) Chart() jobframework.Chart {
	d := k.Def
	return jobframework.Chart{
		Value:      d.Value,
		EnableFlag: "enable-" + d.Name,
		Flags:      []jobframework.ChartFlag{{Key: "concurrency", Flag: d.Name + "-concurrency", Int: true}},
		Resources:  []string{d.Resource},
	}
}

// Owned implements jobframework.Kind.
func (k *Kind) Owned() []client.Object { return k.Def.Owned() }

// SetupWithManager implements jobframework.Kind: its metrics, and its
// controller when the cluster serves the kind (else it says so and sets up
// nothing, so that TrainJobs keep working without the CRD).
func (k *Kind) SetupWithManager(m *jobframework.Manager) error {
	d := k.Def
	metrics := d.NewMetrics()
	if err := metrics.Register(m.Metrics); err != nil {
		return err
	}
	served, err := d.Served(m.GetRESTMapper())
	if err != nil {
		return err
	}
	if !served {
		ctrl.Log.WithName("setup").Info(d.Kind+" controller not started: its CRD is not installed", "crd", d.Resource+"."+kubeflowv1.GroupVersion.Group)
		return nil
	}
	fw, err := d.NewFramework()
	if err != nil {
		return fmt.Errorf("registering %s plugins: %w", d.Kind, err)
	}
	_, err = jobframework.SetupWithManager(m, jobframework.Config{
		Options: jobframework.Options{MaxConcurrentReconciles: k.MaxConcurrentReconciles, Clock: k.Clock},
		Adapter: Adapter{Def: d, Framework: fw, ClusterDomain: m.ClusterDomain, Metrics: metrics},
		Owns:    fw.Owns(),
		Name:    d.Name,
	})
	return err
}

// SetupWebhooks implements jobframework.Kind.
func (k *Kind) SetupWebhooks(m *jobframework.Manager) error {
	if k.Webhooks == nil {
		return nil
	}
	return k.Webhooks(m.Manager)
}

// View implements view.Provider.
func (k *Kind) View() view.Kind { return View{Def: k.Def} }
