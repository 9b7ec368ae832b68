package jobframework

import (
	"context"
	"errors"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainyard/trainyard/pkg/childsync"
	"github.com/trainyard/trainyard/pkg/observe"
)

// Taken names (memory.taken): the children whose create was refused because
// something already holds the name (childsync.ExistsError). The syncer does
// not read to find out whose it is; the next pass observes it by name
// (observeTaken), with everything else it reads.

// refused records the key of a refused create in a pass's sync error.
func (m *memory) refused(job types.NamespacedName, err error) {
	var e *childsync.ExistsError
	if !errors.As(err, &e) {
		return
	}
	m.update(job, true, func(j *jobMemory) {
		if !slices.Contains(j.taken, e.Key) {
			j.taken = append(j.taken, e.Key)
		}
	})
}

// takenKeys are the job's refused keys.
func (m *memory) takenKeys(job types.NamespacedName) []childsync.Key {
	var keys []childsync.Key
	m.update(job, false, func(j *jobMemory) { keys = slices.Clone(j.taken) })
	return keys
}

// keepTaken replaces the job's refused keys.
func (m *memory) keepTaken(job types.NamespacedName, keys []childsync.Key) {
	m.update(job, len(keys) > 0, func(j *jobMemory) { j.taken = keys })
}

// observeTaken reads, from the cache, what holds each name whose create was
// refused and that the job's observed children do not hold. A name found to
// be the job's child, or free, is forgotten.
func (r *Reconciler) observeTaken(ctx context.Context, job client.Object, obs *observe.Observed) (childsync.Children, error) {
	key := types.NamespacedName{Namespace: job.GetNamespace(), Name: job.GetName()}
	keys := r.memory.takenKeys(key)
	if len(keys) == 0 {
		return nil, nil
	}
	var out childsync.Children
	var still []childsync.Key
	for _, k := range keys {
		if _, ours := obs.Children[k]; ours {
			continue
		}
		o, err := r.objectOf(k)
		if err != nil {
			return nil, err
		}
		err = r.client.Get(ctx, client.ObjectKey{Namespace: job.GetNamespace(), Name: k.Name}, o)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("reading %s of %s %s: %w", k, r.adapter.Kind(), job.GetName(), err)
		case metav1.IsControlledBy(o, job):
			continue
		}
		if out == nil {
			out = childsync.Children{}
		}
		out[k] = o
		still = append(still, k)
	}
	r.memory.keepTaken(key, still)
	return out, nil
}

// objectOf returns an empty object of a child kind the pass observes.
func (r *Reconciler) objectOf(k childsync.Key) (client.Object, error) {
	for _, gvk := range r.kinds {
		if gvk.GroupKind() != k.GroupKind {
			continue
		}
		if r.client.Scheme().Recognizes(gvk) {
			o, err := r.client.Scheme().New(gvk)
			if err != nil {
				return nil, fmt.Errorf("type of %s: %w", k, err)
			}
			if co, ok := o.(client.Object); ok {
				return co, nil
			}
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		return u, nil
	}
	return nil, fmt.Errorf("%s is not a kind the pass observes", k.GroupKind)
}
