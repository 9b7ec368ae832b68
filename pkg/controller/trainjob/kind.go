package trainjob

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"time"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
	"github.com/trainyard/trainyard/pkg/runtime/plugins"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/kueue"
)

// runtimeRefIndex indexes TrainJobs by "<kind>/<name>" of their runtime.
const runtimeRefIndex = "spec.runtimeRef"

// Kind is the TrainJob job kind (jobframework.Kind): its controller on the
// runtime plugins, and the TrainJob and runtime webhooks.
type Kind struct {
	// Options tune the controller (--trainjob-concurrency,
	// --status-write-delay, --counts-write-delay).
	jobframework.Options
	// Plugins configure the runtime plugins: --kueue-mode is the kind's own
	// flag (KueueMode, when set, wins over it); the cluster's DNS domain and
	// the status server's URL are the manager's (jobframework.Manager).
	Plugins plugins.Options
	// ExtraPlugins run after Trainyard's own (test-only plugins).
	ExtraPlugins []framework.Plugin

	kueueMode string
	mu        sync.Mutex
	fw        *framework.Framework
}

var _ jobframework.Kind = (*Kind)(nil)

// NewKind returns the TrainJob kind with its defaults.
func NewKind() *Kind {
	return &Kind{
		Options: jobframework.Options{MaxConcurrentReconciles: 20,
			Delays: jobframework.Delays{StatusDelay: time.Second, CountsDelay: 10 * time.Second}},
		kueueMode: string(kueue.ModeTrainJob),
	}
}

// Name implements jobframework.Kind.
func (*Kind) Name() string { return "trainjob" }

// AddToScheme implements jobframework.Kind: TrainJobs, the runtimes and the
// JobSets they run as.
func (*Kind) AddToScheme(s *k8sruntime.Scheme) error {
	if err := trainer.AddToScheme(s); err != nil {
		return err
	}
	return jobsetv1alpha2.AddToScheme(s)
}

// BindFlags implements jobframework.Kind.
func (k *Kind) BindFlags(fs *flag.FlagSet) {
	fs.IntVar(&k.MaxConcurrentReconciles, "trainjob-concurrency", k.MaxConcurrentReconciles, "TrainJobs reconciled in parallel")
	fs.DurationVar(&k.Delays.StatusDelay, "status-write-delay", k.Delays.StatusDelay, "how long a TrainJob's change of phase, reason or condition may wait to be written with the next changes (0: each at once)")
	fs.DurationVar(&k.Delays.CountsDelay, "counts-write-delay", k.Delays.CountsDelay, "how long a TrainJob's change of counts only (the JobSet's job counts, the message that counts nodes) may wait to be written; any other change carries it earlier")
	fs.StringVar(&k.kueueMode, "kueue-mode", k.kueueMode, "how Kueue queues TrainJobs: trainjob (Kueue's TrainJob integration is enabled) or jobset (it is not; Trainyard hands each queued TrainJob's JobSet to Kueue)")
}

// Validate implements jobframework.Kind: the Kueue mode.
func (k *Kind) Validate() error {
	if _, err := kueue.ParseMode(k.kueueMode); err != nil {
		return fmt.Errorf("--kueue-mode: %w", err)
	}
	return nil
}

// Enabled implements jobframework.Kind: TrainJobs always run.
func (*Kind) Enabled() bool { return true }

// Owned implements jobframework.Kind.
func (*Kind) Owned() []client.Object { return plugins.Owned() }

// Framework returns the kind's plugin pipeline on manager m, built on first
// use from the settings (an invalid --kueue-mode is an error).
func (k *Kind) Framework(m *jobframework.Manager) (*framework.Framework, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.fw != nil {
		return k.fw, nil
	}
	o := k.Plugins
	o.ClusterDomain, o.StatusServerURL = m.ClusterDomain, m.StatusServerURL
	if o.KueueMode == "" {
		mode, err := kueue.ParseMode(k.kueueMode)
		if err != nil {
			return nil, fmt.Errorf("--kueue-mode: %w", err)
		}
		o.KueueMode = mode
	}
	fw, err := framework.New(append(plugins.Ordered(o), k.ExtraPlugins...)...)
	if err != nil {
		return nil, fmt.Errorf("registering plugins: %w", err)
	}
	ctrl.Log.WithName("setup").Info("Runtime plugins", "order", fw.Names())
	k.fw = fw
	return fw, nil
}

// SetupWithManager implements jobframework.Kind: the controller watches
// TrainJobs, the children its plugins own, the pods and Kueue Workloads
// status reads, and runtimes (so that a TrainJob waiting for its runtime
// starts as soon as the runtime exists).
func (k *Kind) SetupWithManager(m *jobframework.Manager) error {
	fw, err := k.Framework(m)
	if err != nil {
		return err
	}
	if err := m.GetFieldIndexer().IndexField(context.Background(), &trainer.TrainJob{}, runtimeRefIndex, func(o client.Object) []string {
		return runtimeRefKey(o.(*trainer.TrainJob))
	}); err != nil {
		return err
	}
	tm := NewMetrics(m.GetClient())
	if err := tm.Register(m.Metrics); err != nil {
		return err
	}
	c := m.GetClient()
	gone := &finishedJobSets{}
	_, err = jobframework.SetupWithManager(m, jobframework.Config{
		Options: k.Options,
		Adapter: &Adapter{Framework: fw, Metrics: tm, gone: gone},
		Owns:    fw.Owns(),
		Name:    k.Name(),
		// The controller's own status writes need no second pass: only a
		// change of spec, labels or annotations (Kueue's admission, suspend)
		// wakes a TrainJob; its children's events do the rest.
		For: []predicate.Predicate{predicate.Or(predicate.GenerationChangedPredicate{},
			predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{})},
		Watch: func(b *builder.Builder) *builder.Builder {
			return b.
				Watches(&jobsetv1alpha2.JobSet{}, gone.handler()).
				Watches(&trainer.TrainingRuntime{}, handler.EnqueueRequestsFromMapFunc(runtimeToTrainJobs(c, trainer.TrainingRuntimeKind))).
				Watches(&trainer.ClusterTrainingRuntime{}, handler.EnqueueRequestsFromMapFunc(runtimeToTrainJobs(c, trainer.ClusterTrainingRuntimeKind)))
		},
	})
	return err
}

// SetupWebhooks implements jobframework.Kind: TrainJobs and both runtime kinds.
func (k *Kind) SetupWebhooks(m *jobframework.Manager) error {
	fw, err := k.Framework(m)
	if err != nil {
		return err
	}
	return setupWebhooks(m.Manager, fw)
}

// runtimeRefKey is the index value of a TrainJob's runtime reference.
func runtimeRefKey(job *trainer.TrainJob) []string {
	kind, err := runtime.RefKind(job.Spec.RuntimeRef)
	if err != nil {
		return nil
	}
	return []string{kind + "/" + job.Spec.RuntimeRef.Name}
}

// runtimeToTrainJobs maps a runtime event to the TrainJobs that refer to it and
// have no JobSet yet: those that report an error (Created=False, e.g. their
// runtime did not exist), or have no status at all. Jobs that already run keep
// their snapshot, so edits of the runtime need not wake them.
func runtimeToTrainJobs(c client.Reader, kind string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var list trainer.TrainJobList
		opts := []client.ListOption{client.MatchingFields{runtimeRefIndex: kind + "/" + o.GetName()}}
		if kind == trainer.TrainingRuntimeKind {
			opts = append(opts, client.InNamespace(o.GetNamespace()))
		}
		if err := c.List(ctx, &list, opts...); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing TrainJobs of runtime", "kind", kind, "name", o.GetName())
			return nil
		}
		var reqs []reconcile.Request
		for i := range list.Items {
			job := &list.Items[i]
			if c := FindCondition(job, trainer.TrainJobCreated); (c != nil && c.Status == "False") || job.Status.Phase == "" {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(job)})
			}
		}
		return reqs
	}
}

// JobObject implements jobframework.Typed: TrainJobs are cached whole, also
// where they are children (an OptimizationJob's trials).
func (*Kind) JobObject() client.Object { return &trainer.TrainJob{} }
