package jobframework

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/trainyard/trainyard/pkg/childsync"
)

// CacheOptions keep the manager's memory small: of the child kinds the plugins
// own, only objects Trainyard labelled as its own are cached (a cluster's
// ConfigMaps, Secrets and Services are not the manager's business); only pods
// that belong to a JobSet are cached, and of those only what status needs;
// managed fields are dropped from everything. JobSets are cached whole:
// JobSets written by earlier versions carry no managed-by label. The jobs
// themselves (TrainJobs, PyTorchJobs) are cached whole, managed fields aside.
func CacheOptions(owned []client.Object) cache.Options {
	hasJobSet, _ := labels.NewRequirement(jobsetv1alpha2.JobSetNameKey, selection.Exists, nil)
	managed := labels.SelectorFromSet(labels.Set{childsync.ManagedByLabel: childsync.ManagedBy})
	opts := cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {
				Label:     labels.NewSelector().Add(*hasJobSet),
				Transform: stripPod,
			},
			&jobsetv1alpha2.JobSet{}: {Transform: cache.TransformStripManagedFields()},
		},
	}
	for _, o := range owned {
		if _, isJobSet := o.(*jobsetv1alpha2.JobSet); isJobSet {
			continue
		}
		opts.ByObject[o] = cache.ByObject{Label: managed, Transform: cache.TransformStripManagedFields()}
	}
	return opts
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
