package jobframework

import (
	"reflect"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/trainyard/trainyard/pkg/childsync"
)

// CacheOptions keep the manager's memory small: of the child kinds the plugins
// own, only objects Trainyard labelled as its own are cached (a cluster's
// ConfigMaps, Secrets and Services are not the manager's business), and of
// its ConfigMaps and Secrets not their data (stripData); only pods
// that belong to a JobSet are cached, and of those only what status needs;
// managed fields are dropped from everything. JobSets are all cached (those
// written by earlier versions carry no managed-by label), without their pod
// templates (StripJobSet). The jobs themselves (TrainJobs, PyTorchJobs: jobs)
// are cached whole, managed fields aside, also when they are a child kind of
// another kind (an OptimizationJob's TrainJobs). What is kept shares its
// strings with the other cached objects (internStrings).
func CacheOptions(owned []client.Object, jobs ...client.Object) cache.Options {
	hasJobSet, _ := labels.NewRequirement(jobsetv1alpha2.JobSetNameKey, selection.Exists, nil)
	managed := labels.SelectorFromSet(labels.Set{childsync.ManagedByLabel: childsync.ManagedBy})
	opts := cache.Options{
		DefaultTransform: sharingStrings(cache.TransformStripManagedFields()),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {
				Label:     labels.NewSelector().Add(*hasJobSet),
				Transform: sharingStrings(stripPod),
			},
			&jobsetv1alpha2.JobSet{}: {Transform: sharingStrings(StripJobSet)},
		},
	}
	for _, o := range owned {
		if _, isJobSet := o.(*jobsetv1alpha2.JobSet); isJobSet || isJob(o, jobs) {
			continue
		}
		transform := sharingStrings(cache.TransformStripManagedFields())
		switch o.(type) {
		case *corev1.ConfigMap, *corev1.Secret:
			transform = sharingStrings(stripData)
		}
		opts.ByObject[o] = cache.ByObject{Label: managed, Transform: transform}
	}
	return opts
}

// isJob reports whether o is of the type of one of jobs.
func isJob(o client.Object, jobs []client.Object) bool {
	for _, j := range jobs {
		if reflect.TypeOf(j) == reflect.TypeOf(o) {
			return true
		}
	}
	return false
}

// sharingStrings is transform followed by internStrings.
func sharingStrings(transform toolscache.TransformFunc) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		out, err := transform(obj)
		if err != nil {
			return nil, err
		}
		internStrings(out)
		return out, nil
	}
}

// stripPod keeps a pod's identity, labels and status; the spec is not needed.
func stripPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &corev1.Pod{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			Labels: p.Labels, DeletionTimestamp: p.DeletionTimestamp, CreationTimestamp: p.CreationTimestamp,
		},
		Status: corev1.PodStatus{
			Phase:                 p.Status.Phase,
			Conditions:            p.Status.Conditions,
			ContainerStatuses:     p.Status.ContainerStatuses,
			InitContainerStatuses: p.Status.InitContainerStatuses,
			Reason:                p.Status.Reason,
			Message:               p.Status.Message,
		},
	}, nil
}

// StripJobSet (the cache transform of JobSets) keeps of a JobSet what the
// manager reads from its cache: its identity, labels and annotations (the
// runtime snapshot, which sharingStrings shares: every job of a runtime
// carries the same one; the render hashes), the suspend flag, each replicated job's name, replicas,
// labels and Job counts, and the status. The pod templates, most of a JobSet's
// bytes, are never read back: a suspended JobSet is re-rendered from its runtime snapshot and
// compared by hash, and a running one is never re-rendered. Nothing writes a
// cached JobSet back whole (childsync patches the suspend flag, and applies
// or recreates from a fresh rendering).
func StripJobSet(obj any) (any, error) {
	js, ok := obj.(*jobsetv1alpha2.JobSet)
	if !ok {
		return obj, nil
	}
	js.ManagedFields = nil
	for k := range js.Spec.ReplicatedJobs {
		js.Spec.ReplicatedJobs[k].Template.Spec.Template = corev1.PodTemplateSpec{}
	}
	return js, nil
}

// stripData drops the data of a ConfigMap or Secret Trainyard made (a job's
// CA bundle, hostfile, SSH keys): the manager compares its children by the
// render hash annotation (childsync) and never reads their data back, so
// it need not hold a copy per job, nor keep key material in memory.
func stripData(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		o.ManagedFields, o.Data, o.BinaryData = nil, nil, nil
	case *corev1.Secret:
		o.ManagedFields, o.Data, o.StringData = nil, nil, nil
	}
	return obj, nil
}
