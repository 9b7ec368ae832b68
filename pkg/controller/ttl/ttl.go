// Package ttl decides when finished jobs are deleted after their
// ttlSecondsAfterFinished, the same way for every job kind (TrainJob,
// PyTorchJob): the job is deleted in the background (by the reconciler, with
// a UID precondition, so a job recreated under the same name is safe from an
// old pass) and the garbage collector removes its JobSet, pods and Services.
package ttl

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// Expire says what a finished job's TTL asks for now: delete it (obj is
// returned) when due, else look again after the time left (0: never, as the
// job has no TTL or has not finished).
func Expire(obj client.Object, ttlSeconds *int32, completion *metav1.Time, now time.Time) (client.Object, time.Duration) {
	if ttlSeconds == nil || completion == nil {
		return nil, 0
	}
	if left := Remaining(ttlSeconds, completion, now); left > 0 {
		return nil, left
	}
	return obj, 0
}
