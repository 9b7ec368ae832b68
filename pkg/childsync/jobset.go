package childsync

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// syncJobSet applies plan.RuleJobSet:
//   - no JobSet: create it (create, not apply: a cache that has not seen a
//     JobSet created a moment ago gets AlreadyExists instead of re-rendering);
//   - a running JobSet is never re-rendered (JobSet forbids most changes); it
//     is only suspended when its owner is;
//   - a suspended JobSet is re-rendered, and applied when the rendering changed
//     (a queue's node selectors, a resume), or recreated when a part JobSet
//     keeps immutable changed: a suspended JobSet runs no pods, so nothing is
//     lost.
func (s *Syncer) syncJobSet(ctx context.Context, ownerSuspended bool, desired *jobsetv1alpha2.JobSet, current client.Object) (client.Object, Action, error) {
	if current == nil {
		if _, err := Hashes(desired); err != nil {
			return nil, None, err
		}
		if err := s.create(ctx, desired); err != nil {
			return nil, None, err
		}
		return desired, Created, nil
	}
	existing, ok := current.(*jobsetv1alpha2.JobSet)
	if !ok {
		return current, None, fmt.Errorf("observed %T for JobSet %s", current, desired.Name)
	}
	if !ptr.Deref(existing.Spec.Suspend, false) {
		if !ownerSuspended {
			return existing, None, nil
		}
		// Only the suspend flag changes on a running JobSet; the pod template is
		// updated once the JobSet is suspended, which JobSet allows.
		patch := client.RawPatch(client.Merge.Type(), []byte(`{"spec":{"suspend":true}}`))
		if err := s.Client.Patch(ctx, existing, patch, client.FieldOwner(s.FieldOwner)); err != nil {
			return existing, None, fmt.Errorf("suspending JobSet %s: %w", existing.Name, err)
		}
		return existing, Suspended, nil
	}

	if _, err := Hashes(desired); err != nil {
		return existing, None, err
	}
	if desired.Annotations[RenderHashAnnotation] == existing.Annotations[RenderHashAnnotation] {
		return existing, None, nil
	}
	if desired.Annotations[TemplateHashAnnotation] != existing.Annotations[TemplateHashAnnotation] {
		if err := s.Client.Delete(ctx, existing, client.PropagationPolicy(metav1.DeletePropagationBackground),
			client.Preconditions{UID: &existing.UID}); err != nil && !apierrors.IsNotFound(err) {
			return existing, None, fmt.Errorf("deleting JobSet %s to recreate it: %w", existing.Name, err)
		}
		if err := s.Client.Create(ctx, desired, client.FieldOwner(s.FieldOwner)); err != nil {
			return nil, None, fmt.Errorf("recreating JobSet %s: %w", desired.Name, err)
		}
		return desired, Recreated, nil
	}
	if err := s.apply(ctx, desired); err != nil {
		return existing, None, err
	}
	if ptr.Deref(desired.Spec.Suspend, false) {
		return desired, Updated, nil
	}
	return desired, Resumed, nil
}

// Hashes sets the template and render hash annotations of js and returns
// the render hash.
func Hashes(js *jobsetv1alpha2.JobSet) (string, error) {
	if js.Annotations == nil {
		js.Annotations = map[string]string{}
	}
	delete(js.Annotations, RenderHashAnnotation)
	tmplHash, err := templateHash(js)
	if err != nil {
		return "", err
	}
	js.Annotations[TemplateHashAnnotation] = tmplHash
	renderHash, err := hashJSON(struct {
		Labels, Annotations map[string]string
		Spec                jobsetv1alpha2.JobSetSpec
	}{js.Labels, js.Annotations, js.Spec})
	if err != nil {
		return "", err
	}
	js.Annotations[RenderHashAnnotation] = renderHash
	return renderHash, nil
}

// templateHash hashes the JobSet spec without suspend and without the pod
// template fields JobSet lets change while suspended (labels, annotations,
// nodeSelector, tolerations, schedulingGates).
func templateHash(js *jobsetv1alpha2.JobSet) (string, error) {
	spec := js.Spec.DeepCopy()
	spec.Suspend = nil
	for k := range spec.ReplicatedJobs {
		pt := &spec.ReplicatedJobs[k].Template.Spec.Template
		pt.Labels, pt.Annotations = nil, nil
		pt.Spec.NodeSelector, pt.Spec.Tolerations, pt.Spec.SchedulingGates = nil, nil, nil
	}
	return hashJSON(spec)
}
