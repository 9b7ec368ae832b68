// Package controller wires Trainyard's job kinds into the manager. Every kind
// runs on the one generic reconciler of pkg/controller/jobframework, behind a
// small adapter (pkg/controller/trainjob, pkg/controller/pytorchjobcontroller); what a
// kind's jobs create is the plan its runtime plugins build.
package controller

import (
	"context"
	"fmt"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
	"github.com/trainyard/trainyard/pkg/controller/trainjob"
	legacy "github.com/trainyard/trainyard/pkg/legacy/pytorchjob"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
	"github.com/trainyard/trainyard/pkg/runtime/plugins"
)

// FieldOwner is the field manager of every write Trainyard makes.
const FieldOwner = jobframework.FieldOwner

// SnapshotAnnotation on a JobSet holds the runtime it was rendered from.
const SnapshotAnnotation = trainjob.SnapshotAnnotation

// runtimeRefIndex indexes TrainJobs by "<kind>/<name>" of their runtime.
const runtimeRefIndex = "spec.runtimeRef"

// Options tune the TrainJob controller.
type Options = jobframework.Options

// Delays bound how long a TrainJob's status change may wait to be written.
type Delays = jobframework.Delays

// ClientOptions are the manager's client settings: reads of unstructured
// objects (children of kinds whose Go types Trainyard does not import, such
// as the gang schedulers' PodGroups) come from the cache too, where the
// owner index that finds a job's children lives.
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{Unstructured: true}}
}

// CacheOptions are the manager's cache settings for every job kind's
// children (see jobframework.CacheOptions); extra are child kinds of plugins
// beyond Trainyard's own. Kinds the cluster does not serve (a CRD that is not
// installed) are left out: the manager could not start with them.
func CacheOptions(cfg *rest.Config, scheme *k8sruntime.Scheme, extra ...client.Object) (cache.Options, error) {
	owned := plugins.Owned()
	owned = append(owned, legacy.Owned()...)
	owned = append(owned, extra...)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return cache.Options{}, fmt.Errorf("API client: %w", err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		return cache.Options{}, fmt.Errorf("discovering the API: %w", err)
	}
	var served []client.Object
	for _, o := range owned {
		gvk, err := apiutil.GVKForObject(o, scheme)
		if err != nil {
			continue // not in this manager's scheme: no controller asks for it
		}
		if _, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
			served = append(served, o)
		}
	}
	return jobframework.CacheOptions(served), nil
}

// SetupWithManager registers the TrainJob controller: it watches TrainJobs,
// the children its plugins own, the pods and Kueue Workloads status reads,
// and runtimes (so that a TrainJob waiting for its runtime starts as soon as
// the runtime exists).
func SetupWithManager(mgr ctrl.Manager, fw *framework.Framework, opts Options) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &trainer.TrainJob{}, runtimeRefIndex, func(o client.Object) []string {
		return runtimeRefKey(o.(*trainer.TrainJob))
	}); err != nil {
		return err
	}
	c := mgr.GetClient()
	_, err := jobframework.SetupWithManager(mgr, jobframework.Config{
		Options: opts,
		Adapter: &trainjob.Adapter{Framework: fw},
		Owns:    fw.Owns(),
		Name:    "trainjob",
		// The controller's own status writes need no second pass: only a
		// change of spec, labels or annotations (Kueue's admission, suspend)
		// wakes a TrainJob; its children's events do the rest.
		For: []predicate.Predicate{predicate.Or(predicate.GenerationChangedPredicate{},
			predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{})},
		Watch: func(b *builder.Builder) *builder.Builder {
			return b.
				Watches(&trainer.TrainingRuntime{}, handler.EnqueueRequestsFromMapFunc(runtimeToTrainJobs(c, trainer.TrainingRuntimeKind))).
				Watches(&trainer.ClusterTrainingRuntime{}, handler.EnqueueRequestsFromMapFunc(runtimeToTrainJobs(c, trainer.ClusterTrainingRuntimeKind)))
		},
	})
	return err
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
			if c := trainjob.FindCondition(job, trainer.TrainJobCreated); (c != nil && c.Status == "False") || job.Status.Phase == "" {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(job)})
			}
		}
		return reqs
	}
}
