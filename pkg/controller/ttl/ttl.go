// Package ttl deletes finished jobs once their ttlSecondsAfterFinished has
// passed, the same way for every job kind (TrainJob, PyTorchJob): the owner is
// deleted in the background and the garbage collector removes its JobSet,
// pods and Services.
package ttl

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Remaining is how long a job that finished at completion has left before its
// TTL deletes it: 0 when it has no TTL, has not finished, or is due.
func Remaining(ttlSeconds *int32, completion *metav1.Time, now time.Time) time.Duration {
	if ttlSeconds == nil || completion == nil {
		return 0
	}
	return max(completion.Add(time.Duration(*ttlSeconds)*time.Second).Sub(now), 0)
}

// Expire deletes obj when its TTL is due, or says when to look again (0: never,
// or deleted now). The UID precondition keeps a job recreated under the same
// name safe from an old pass.
func Expire(ctx context.Context, c client.Client, obj client.Object, ttlSeconds *int32, completion *metav1.Time, now time.Time) (time.Duration, error) {
	if ttlSeconds == nil || completion == nil {
		return 0, nil
	}
	if left := Remaining(ttlSeconds, completion, now); left > 0 {
		return left, nil
	}
	ctrl.LoggerFrom(ctx).V(2).Info("Deleting finished job past its TTL", "ttlSecondsAfterFinished", *ttlSeconds)
	uid := obj.GetUID()
	if err := c.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground),
		client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
		return 0, fmt.Errorf("deleting %s past its TTL: %w", obj.GetName(), err)
	}
	return 0, nil
}
