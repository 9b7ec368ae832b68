package controller

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// CacheOptions keep the manager's memory small: only pods that belong to a
// JobSet are cached, and of those only what status needs; managed fields are
// dropped from everything.
func CacheOptions() cache.Options {
	hasJobSet, _ := labels.NewRequirement(jobsetv1alpha2.JobSetNameKey, selection.Exists, nil)
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {
				Label:     labels.NewSelector().Add(*hasJobSet),
				Transform: stripPod,
			},
			&jobsetv1alpha2.JobSet{}: {Transform: cache.TransformStripManagedFields()},
			&trainer.TrainJob{}:      {Transform: cache.TransformStripManagedFields()},
		},
	}
}

// stripPod keeps a pod's identity, labels and status; the spec is not needed.
func stripPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &corev1.Pod{
		TypeMeta:   p.TypeMeta,
		ObjectMeta: metav1ObjectMeta(p),
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
