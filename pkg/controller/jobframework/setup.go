package jobframework

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
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

	"github.com/trainyard/trainyard/pkg/childsync"
	"github.com/trainyard/trainyard/pkg/eventrecorder"
)

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=workloads,verbs=get;list;watch

// Options tune the controller of a job kind.
type Options struct {
	// MaxConcurrentReconciles is the number of jobs reconciled at once.
	MaxConcurrentReconciles int
	// Clock decides deadlines and TTLs; the real clock when nil.
	Clock clock.PassiveClock
	// Delays let status changes wait to go out together (zero: each change
	// is written at once).
	Delays Delays
}

// Delays bound how long a job's status change may wait to be written, so
// that the transitions of one moment (each pod getting ready, the JobSet's
// counts following) go out in one write. They bound how stale kubectl get
// may be.
type Delays struct {
	// StatusDelay bounds the wait of a change of phase, reason, condition or
	// of anything else kubectl get shows (ready nodes).
	StatusDelay time.Duration
	// CountsDelay bounds the wait of a change of counts only (the JobSet's
	// job counts); never shorter than StatusDelay. Such a change
	// goes out earlier with any other change.
	CountsDelay time.Duration
}

// Config wires one job kind into a controller.
type Config struct {
	Options
	// Adapter is the job kind.
	Adapter Adapter
	// Owns are the child kinds the kind's plugins emit (framework.Owns).
	Owns []client.Object
	// Name names the controller (and its event recorder).
	Name string
	// For filters the job's own events (nil: every change).
	For []predicate.Predicate
	// Watch adds the kind's own watches (runtimes, ...).
	Watch func(b *builder.Builder) *builder.Builder
}

// served reports whether the cluster serves a kind; errors other than "no
// such kind" are returned.
func served(mgr ctrl.Manager, gvk schema.GroupVersionKind) (bool, error) {
	if _, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
		if apimeta.IsNoMatchError(err) {
			return false, nil
		}
		return false, fmt.Errorf("looking up %s: %w", gvk, err)
	}
	return true, nil
}

// SetupWithManager registers a controller for one job kind. It watches the
// jobs, every child kind the plugins own that the cluster serves (through the
// children's controller owner reference), the pods of the jobs' JobSets and,
// when Kueue is installed, Kueue's Workloads. A child kind the cluster does
// not serve is logged and left unwatched; a job whose plan needs it gets a
// clear status error instead of running without it.
func SetupWithManager(m *Manager, cfg Config) (*Reconciler, error) {
	mgr := m.Manager
	log := ctrl.Log.WithName("setup").WithValues("controller", cfg.Name)
	r := &Reconciler{
		adapter: cfg.Adapter,
		client:  mgr.GetClient(),
		clock:   cfg.Clock,
		// The wait between writes is real time, whatever clock decides
		// deadlines (tests step a fake one).
		wall:   clock.RealClock{},
		delays: cfg.Delays,
	}
	if r.clock == nil {
		r.clock = clock.RealClock{}
	}
	kueueGVK := kueue.GroupVersion.WithKind("Workload")
	var err error
	if r.kueue, err = served(mgr, kueueGVK); err != nil {
		return nil, err
	}
	notServed := map[schema.GroupKind]bool{}
	job := cfg.Adapter.New()
	b := ctrl.NewControllerManagedBy(mgr).Named(cfg.Name).
		For(job, builder.WithPredicates(cfg.For...)).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(cfg.MaxConcurrentReconciles, 1)})
	for _, kind := range cfg.Owns {
		gvk, err := mgr.GetClient().GroupVersionKindFor(kind)
		if err != nil {
			return nil, fmt.Errorf("kind of %T: %w", kind, err)
		}
		ok, err := served(mgr, gvk)
		if err != nil {
			return nil, err
		}
		if !ok {
			log.Info("Child kind not served by this cluster: its CRD is not installed; jobs whose runtime needs it report an error", "kind", gvk.String())
			notServed[gvk.GroupKind()] = true
			continue
		}
		if err := m.indexOnce(kind, ownerIndex, controllerUID); err != nil {
			return nil, fmt.Errorf("indexing %s by owner: %w", gvk.Kind, err)
		}
		r.kinds = append(r.kinds, gvk)
		// Children's events wait behind new jobs (see lowPriority).
		b = b.Watches(kind, lowPriority(handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), job, handler.OnlyControllerOwner())))
	}
	r.syncer = &childsync.Syncer{Client: r.client, FieldOwner: FieldOwner, Served: func(gk schema.GroupKind) bool { return !notServed[gk] }}
	if w := m.writer(); w != nil {
		r.syncer.Create, r.patchStatus = w.Create, w.PatchStatus
	}
	if err := m.indexOnce(&corev1.Pod{}, podJobSetIndex, jobSetName); err != nil {
		return nil, fmt.Errorf("indexing pods by JobSet: %w", err)
	}
	b = b.Watches(&corev1.Pod{}, lowPriority(handler.EnqueueRequestsFromMapFunc(PodToJob)), builder.WithPredicates(podChanged))
	if r.kueue {
		if err := m.indexOnce(&kueue.Workload{}, workloadJobIndex, workloadJobUID); err != nil {
			return nil, fmt.Errorf("indexing Kueue workloads: %w", err)
		}
		b = b.Watches(&kueue.Workload{}, lowPriority(handler.EnqueueRequestsFromMapFunc(WorkloadToJob(mgr.GetClient(), job))))
	}
	if cfg.Watch != nil {
		b = cfg.Watch(b)
	}
	// The one place the manager's recorders come from (not
	// mgr.GetEventRecorder): their Events carry core/v1's firstTimestamp,
	// lastTimestamp and count, which Kubeflow's SDK reads.
	recorders, err := eventrecorder.ForManager(mgr)
	if err != nil {
		return nil, err
	}
	r.recorder = recorders.GetEventRecorder("trainyard-" + cfg.Name + "-controller")
	log.Info("Controller", "kueueWorkloads", r.kueue, "children", r.kinds)
	return r, b.Complete(r)
}

// PodToJob maps a pod to the job of its JobSet: Trainyard names each JobSet
// after its job. Pods of other JobSets map to a job that does not exist,
// which reconciles to nothing.
func PodToJob(_ context.Context, o client.Object) []reconcile.Request {
	name := o.GetLabels()[jobsetv1alpha2.JobSetNameKey]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: name}}}
}

// WorkloadToJob maps a Kueue Workload to its job: the owner is the job
// itself (Kueue's integration for the kind), or its JobSet, which is named
// after the job.
func WorkloadToJob(c client.Client, job client.Object) handler.MapFunc {
	gvk, _ := c.GroupVersionKindFor(job)
	return func(_ context.Context, o client.Object) []reconcile.Request {
		for _, ref := range o.GetOwnerReferences() {
			if (ref.Kind == gvk.Kind && strings.HasPrefix(ref.APIVersion, gvk.Group+"/")) ||
				(ref.Kind == "JobSet" && strings.HasPrefix(ref.APIVersion, jobsetv1alpha2.GroupVersion.Group+"/")) {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: ref.Name}}}
			}
		}
		return nil
	}
}
