package pytorchjob

import (
	"flag"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
)

// Options tune the PyTorchJob controller.
type Options struct {
	// MaxConcurrentReconciles is the number of jobs reconciled at once.
	MaxConcurrentReconciles int
	// Clock decides deadlines and TTLs; the real clock when nil.
	Clock clock.PassiveClock
	// GangScheduler puts every PyTorchJob's pods in a gang (v1's
	// --gang-scheduler-name); runPolicy.schedulingPolicy shapes it.
	GangScheduler GangScheduler
}

// Kind is the PyTorchJob job kind (jobframework.Kind). Its settings are its
// own flags: --enable-pytorchjob, --pytorchjob-concurrency and v1's
// --gang-scheduler-name.
type Kind struct {
	Options
	enabled   bool
	gangSched string
}

var _ jobframework.Kind = (*Kind)(nil)

// NewKind returns the PyTorchJob kind with its defaults: enabled, 20 jobs at once, no gang.
func NewKind() *Kind { return &Kind{Options: Options{MaxConcurrentReconciles: 20}, enabled: true} }

// Name implements jobframework.Kind.
func (*Kind) Name() string { return "pytorchjob" }

// AddToScheme implements jobframework.Kind.
func (*Kind) AddToScheme(s *k8sruntime.Scheme) error {
	if err := kubeflowv1.AddToScheme(s); err != nil {
		return err
	}
	return jobsetv1alpha2.AddToScheme(s)
}

// BindFlags implements jobframework.Kind.
func (k *Kind) BindFlags(fs *flag.FlagSet) {
	fs.BoolVar(&k.enabled, "enable-pytorchjob", k.enabled, "run legacy kubeflow.org/v1 PyTorchJobs (needs the pytorchjobs.kubeflow.org CRD); false registers no PyTorchJob controller, webhook or metric")
	fs.IntVar(&k.MaxConcurrentReconciles, "pytorchjob-concurrency", k.MaxConcurrentReconciles, "PyTorchJobs reconciled in parallel")
	fs.StringVar(&k.gangSched, "gang-scheduler-name", k.gangSched, "gang scheduler of legacy PyTorchJobs, as v1's flag: volcano or scheduler-plugins (their pods get a PodGroup shaped by runPolicy.schedulingPolicy); empty: none")
}

// Validate implements jobframework.Kind: the gang scheduler's name.
func (k *Kind) Validate() error {
	gs, err := ParseGangScheduler(k.gangSched)
	if err != nil {
		return fmt.Errorf("--gang-scheduler-name: %w", err)
	}
	k.GangScheduler = gs
	return nil
}

// SetEnabled turns the kind on or off, as --enable-pytorchjob does.
func (k *Kind) SetEnabled(on bool) { k.enabled = on }

// Enabled implements jobframework.Kind.
func (k *Kind) Enabled() bool { return k.enabled }

// Chart implements jobframework.Charted: the chart's pytorchJob value.
func (*Kind) Chart() jobframework.Chart {
	return jobframework.Chart{
		Value:      "pytorchJob",
		EnableFlag: "enable-pytorchjob",
		Flags: []jobframework.ChartFlag{
			{Key: "gangSchedulerName", Flag: "gang-scheduler-name"},
			{Key: "concurrency", Flag: "pytorchjob-concurrency", Int: true},
		},
		Resources: []string{"pytorchjobs"},
	}
}

// Owned implements jobframework.Kind.
func (*Kind) Owned() []client.Object { return Owned() }

// SetupWithManager implements jobframework.Kind.
func (k *Kind) SetupWithManager(m *jobframework.Manager) error {
	if k.gangSched != "" {
		if err := k.Validate(); err != nil {
			return err
		}
	}
	pm := NewMetrics()
	if err := pm.Register(m.Metrics); err != nil {
		return err
	}
	return setup(m, k.Options, pm)
}

// SetupWebhooks implements jobframework.Kind.
func (*Kind) SetupWebhooks(m *jobframework.Manager) error { return setupWebhooks(m.Manager) }

// SetupWithManager registers the PyTorchJob controller on the generic
// reconciler, with opts, on a manager of its own (see Kind for the
// manager's kinds). The manager's scheme must include kubeflow.org/v1
// (apis/kubeflow/v1.AddToScheme).
func SetupWithManager(mgr ctrl.Manager, opts Options) error {
	return setup(jobframework.NewManager(mgr, nil), opts, nil)
}

// setup registers the controller. Without the pytorchjobs.kubeflow.org CRD
// the controller is not started (and says so), so that installing Trainyard
// without it keeps TrainJobs working.
func setup(m *jobframework.Manager, opts Options, pm *Metrics) error {
	served, err := Served(m.GetRESTMapper())
	if err != nil {
		return err
	}
	if !served {
		ctrl.Log.WithName("setup").Info("PyTorchJob controller not started: the pytorchjobs.kubeflow.org CRD is not installed")
		return nil
	}
	fw, err := NewFramework()
	if err != nil {
		return fmt.Errorf("registering PyTorchJob plugins: %w", err)
	}
	_, err = jobframework.SetupWithManager(m, jobframework.Config{
		Options: jobframework.Options{MaxConcurrentReconciles: opts.MaxConcurrentReconciles, Clock: opts.Clock},
		Adapter: Adapter{Framework: fw, GangScheduler: opts.GangScheduler, Metrics: pm},
		Owns:    fw.Owns(),
		Name:    "pytorchjob",
	})
	return err
}

// recordTransitions counts the conditions that are True now and were not before.
func recordTransitions(m *Metrics, old, cur *kubeflowv1.JobStatus) {
	for _, c := range cur.Conditions {
		if c.Status == corev1.ConditionTrue && !IsTrue(old, c.Type) {
			m.ConditionTrue(string(c.Type))
		}
	}
}

// JobObject implements jobframework.Typed.
func (*Kind) JobObject() client.Object { return &kubeflowv1.PyTorchJob{} }
