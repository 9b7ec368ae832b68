package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
)

// Options tune the controller.
type Options struct {
	// MaxConcurrentReconciles is the number of TrainJobs reconciled at once.
	MaxConcurrentReconciles int
	// Clock decides deadlines; the real clock when nil.
	Clock clock.PassiveClock
}

// kueueServed reports whether Kueue's Workload API (v1beta2) is installed.
func kueueServed(mgr ctrl.Manager) bool {
	_, err := mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: kueue.GroupVersion.Group, Kind: "Workload"}, kueue.GroupVersion.Version)
	return err == nil
}

// SetupWithManager registers the TrainJob controller: it watches TrainJobs, the
// JobSets they own, and runtimes (so that a TrainJob waiting for its runtime
// starts as soon as the runtime exists).
func SetupWithManager(mgr ctrl.Manager, fw *framework.Framework, opts Options) error {
	ctx := context.Background()
	if err := mgr.GetFieldIndexer().IndexField(ctx, &trainer.TrainJob{}, runtimeRefIndex, func(o client.Object) []string {
		return runtimeRefKey(o.(*trainer.TrainJob))
	}); err != nil {
		return err
	}
	kueueOn := kueueServed(mgr)
	if err := setUpIndexes(ctx, mgr, kueueOn); err != nil {
		return err
	}
	r := &TrainJobReconciler{
		Client:    mgr.GetClient(),
		Framework: fw,
		Recorder:  mgr.GetEventRecorder("trainyard-trainjob-controller"),
		Clock:     opts.Clock,
	}
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	r.Kueue = kueueOn
	ctrl.Log.WithName("setup").Info("TrainJob controller", "kueueWorkloads", r.Kueue)
	b := ctrl.NewControllerManagedBy(mgr).
		Named("trainjob").
		// The controller's own status writes need no second pass: only a
		// change of spec, labels or annotations (Kueue's admission, suspend)
		// wakes a TrainJob; its children's events do the rest.
		For(&trainer.TrainJob{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{},
			predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		// Children's events wait behind new TrainJobs (see lowPriority).
		Watches(&jobsetv1alpha2.JobSet{}, lowPriority(handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(),
			&trainer.TrainJob{}, handler.OnlyControllerOwner()))).
		Watches(&corev1.Pod{}, lowPriority(handler.EnqueueRequestsFromMapFunc(podToTrainJob)), builder.WithPredicates(podChanged)).
		Watches(&trainer.TrainingRuntime{}, handler.EnqueueRequestsFromMapFunc(r.runtimeToTrainJobs(trainer.TrainingRuntimeKind))).
		Watches(&trainer.ClusterTrainingRuntime{}, handler.EnqueueRequestsFromMapFunc(r.runtimeToTrainJobs(trainer.ClusterTrainingRuntimeKind))).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(opts.MaxConcurrentReconciles, 1)})
	if r.Kueue {
		b = b.Watches(&kueue.Workload{}, lowPriority(handler.EnqueueRequestsFromMapFunc(workloadToTrainJob)))
	}
	return b.Complete(r)
}

// runtimeToTrainJobs maps a runtime event to the TrainJobs that refer to it and
// have no JobSet yet. Jobs that already run keep their snapshot, so edits of
// the runtime need not wake them.
func (r *TrainJobReconciler) runtimeToTrainJobs(kind string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var list trainer.TrainJobList
		opts := []client.ListOption{client.MatchingFields{runtimeRefIndex: kind + "/" + o.GetName()}}
		if kind == trainer.TrainingRuntimeKind {
			opts = append(opts, client.InNamespace(o.GetNamespace()))
		}
		if err := r.List(ctx, &list, opts...); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing TrainJobs of runtime", "kind", kind, "name", o.GetName())
			return nil
		}
		var reqs []reconcile.Request
		for i := range list.Items {
			job := &list.Items[i]
			if c := findCondition(job, trainer.TrainJobCreated); c == nil || c.Status != "True" {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(job)})
			}
		}
		return reqs
	}
}
