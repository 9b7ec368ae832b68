package optimizationjob

import (
	"flag"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
)

// Kind is the OptimizationJob job kind (jobframework.Kind). Its settings
// are its own flags: --enable-optimizationjob and
// --optimizationjob-concurrency.
type Kind struct {
	// MaxConcurrentReconciles is the number of OptimizationJobs reconciled at once.
	MaxConcurrentReconciles int
	// Clock decides condition times; the real clock when nil.
	Clock   clock.PassiveClock
	enabled bool
}

var (
	_ jobframework.Kind    = (*Kind)(nil)
	_ jobframework.Typed   = (*Kind)(nil)
	_ jobframework.Charted = (*Kind)(nil)
)

// NewKind returns the OptimizationJob kind with its defaults: enabled, 5 jobs at once.
func NewKind() *Kind { return &Kind{MaxConcurrentReconciles: 5, enabled: true} }

// Name implements jobframework.Kind.
func (*Kind) Name() string { return "optimizationjob" }

// AddToScheme implements jobframework.Kind.
func (*Kind) AddToScheme(s *k8sruntime.Scheme) error { return trainer.AddToScheme(s) }

// BindFlags implements jobframework.Kind.
func (k *Kind) BindFlags(fs *flag.FlagSet) {
	fs.BoolVar(&k.enabled, "enable-optimizationjob", k.enabled, "run OptimizationJobs (hyperparameter search, trials as TrainJobs; needs the optimizationjobs.trainer.kubeflow.org CRD); false registers no OptimizationJob controller, webhook or metric")
	fs.IntVar(&k.MaxConcurrentReconciles, "optimizationjob-concurrency", k.MaxConcurrentReconciles, "OptimizationJobs reconciled in parallel")
}

// Validate implements jobframework.Kind.
func (k *Kind) Validate() error {
	if k.MaxConcurrentReconciles < 1 {
		return fmt.Errorf("--optimizationjob-concurrency must be at least 1, not %d", k.MaxConcurrentReconciles)
	}
	return nil
}

// SetEnabled turns the kind on or off, as --enable-optimizationjob does.
func (k *Kind) SetEnabled(on bool) { k.enabled = on }

// Enabled implements jobframework.Kind.
func (k *Kind) Enabled() bool { return k.enabled }

// Owned implements jobframework.Kind: the trials.
func (*Kind) Owned() []client.Object { return []client.Object{&trainer.TrainJob{}} }

// JobObject implements jobframework.Typed.
func (*Kind) JobObject() client.Object { return &trainer.OptimizationJob{} }

// Chart implements jobframework.Charted: the chart's optimizationJob value.
func (*Kind) Chart() jobframework.Chart {
	return jobframework.Chart{
		Value:      "optimizationJob",
		EnableFlag: "enable-optimizationjob",
		Flags:      []jobframework.ChartFlag{{Key: "concurrency", Flag: "optimizationjob-concurrency", Int: true}},
		Resources:  []string{"optimizationjobs"},
	}
}

// Served reports whether the cluster serves OptimizationJobs (the CRD is
// installed; an install from before it was added keeps working without).
func Served(mapper meta.RESTMapper) (bool, error) {
	gvk := trainer.GroupVersion.WithKind(trainer.OptimizationJobKind)
	if _, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
		if meta.IsNoMatchError(err) {
			return false, nil
		}
		return false, fmt.Errorf("looking up the OptimizationJob API: %w", err)
	}
	return true, nil
}

// SetupWithManager implements jobframework.Kind: the controller watches
// OptimizationJobs and their trials (TrainJobs they control).
func (k *Kind) SetupWithManager(m *jobframework.Manager) error {
	served, err := Served(m.GetRESTMapper())
	if err != nil {
		return err
	}
	if !served {
		ctrl.Log.WithName("setup").Info("OptimizationJob controller not started: the optimizationjobs.trainer.kubeflow.org CRD is not installed")
		return nil
	}
	om := NewMetrics()
	if err := om.Register(m.Metrics); err != nil {
		return err
	}
	_, err = jobframework.SetupWithManager(m, jobframework.Config{
		Options: jobframework.Options{MaxConcurrentReconciles: k.MaxConcurrentReconciles, Clock: k.Clock},
		Adapter: Adapter{Metrics: om},
		Owns:    k.Owned(),
		Name:    k.Name(),
		// Its own status writes need no second pass: the trials' events
		// bring the passes that matter.
		For: []predicate.Predicate{predicate.Or(predicate.GenerationChangedPredicate{},
			predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{})},
	})
	return err
}

// SetupWebhooks implements jobframework.Kind.
func (*Kind) SetupWebhooks(m *jobframework.Manager) error {
	served, err := Served(m.GetRESTMapper())
	if err != nil || !served {
		return err
	}
	return setupWebhooks(m.Manager)
}
