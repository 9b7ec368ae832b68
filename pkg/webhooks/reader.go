package webhooks

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// LiveOnMiss returns a reader that reads from cache and asks live only when
// the cache says an object does not exist (see liveOnMiss).
func LiveOnMiss(cache, live client.Reader) client.Reader {
	return liveOnMiss{Reader: cache, live: live}
}

// liveOnMiss reads from the manager's cache and asks the API server only when
// the cache says an object does not exist. The cache lags the API server: a
// runtime applied together with its TrainJob (`kubectl apply -f runtime.yaml
// -f trainjob.yaml`, a test creating both) can reach the webhook before the
// runtime reaches the informer, and a rejection must not depend on that race.
// A hit needs no second read, and a real miss costs one GET, so the common
// path stays on the cache.
type liveOnMiss struct {
	client.Reader
	live client.Reader
}

// Get implements client.Reader.
func (r liveOnMiss) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := r.Reader.Get(ctx, key, obj, opts...)
	if !apierrors.IsNotFound(err) {
		return err
	}
	return r.live.Get(ctx, key, obj, opts...)
}
