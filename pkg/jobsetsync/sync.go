// Package jobsetsync keeps the one JobSet of an owner object (a TrainJob, a
// PyTorchJob) in line with it. It is the one mechanism every job kind shares; a
// kind only says whether it is suspended and how to render its JobSet.
//
// The rules:
//   - no JobSet: render and create it (create, not apply: a cache that has not
//     seen a JobSet created a moment ago gets AlreadyExists instead of
//     re-rendering it);
//   - a running JobSet is never re-rendered (JobSet forbids most changes); it is
//     only suspended when its owner is;
//   - a suspended JobSet is re-rendered, and applied when the rendering changed
//     (a queue's node selectors, a resume), or recreated when a part JobSet keeps
//     immutable changed: a suspended JobSet runs no pods, so nothing is lost.
//
// Each JobSet carries two hashes as annotations, so that no-op applies are skipped.
package jobsetsync

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// Annotations Trainyard keeps on the JobSets it owns.
const (
	// RenderHashAnnotation is the hash of the whole rendered JobSet: equal means
	// nothing to apply.
	RenderHashAnnotation = "trainyard.io/render-hash"
	// TemplateHashAnnotation is the hash of the parts of the JobSet that JobSet
	// never lets change, even while suspended: different means recreate.
	TemplateHashAnnotation = "trainyard.io/template-hash"
)

// ErrNotOwned: a JobSet with the owner's name exists but belongs to someone
// else. It is never touched.
var ErrNotOwned = errors.New("JobSet not owned")

// Action says what Sync did.
type Action string

// Actions.
const (
	None      Action = ""
	Created   Action = "Created"
	Updated   Action = "Updated"
	Recreated Action = "Recreated"
	Suspended Action = "Suspended"
	Resumed   Action = "Resumed"
)

// RenderFunc renders the owner's desired JobSet. existing is the current JobSet
// (nil when there is none), for renderers that keep inputs on it (the TrainJob's
// runtime snapshot).
type RenderFunc func(existing *jobsetv1alpha2.JobSet) (*jobsetv1alpha2.JobSet, error)

// Syncer writes JobSets with one field owner.
type Syncer struct {
	Client     client.Client
	FieldOwner string
}

// Sync brings owner's JobSet (existing, nil when absent) in line and returns the
// JobSet as it now is. suspended is whether the owner asks to be suspended.
func (s *Syncer) Sync(ctx context.Context, owner client.Object, suspended bool, existing *jobsetv1alpha2.JobSet, render RenderFunc) (*jobsetv1alpha2.JobSet, Action, error) {
	if existing == nil {
		desired, err := s.desired(owner, nil, render)
		if err != nil {
			return nil, None, err
		}
		if err := s.Client.Create(ctx, desired, client.FieldOwner(s.FieldOwner)); err != nil {
			return nil, None, fmt.Errorf("creating JobSet %s: %w", desired.Name, err)
		}
		return desired, Created, nil
	}
	if ref := metav1.GetControllerOf(existing); ref == nil || ref.UID != owner.GetUID() {
		return existing, None, fmt.Errorf("%w: JobSet %s/%s already exists and is not controlled by %s %s; delete or rename one of them",
			ErrNotOwned, existing.Namespace, existing.Name, kindOf(owner), owner.GetName())
	}

	if !ptr.Deref(existing.Spec.Suspend, false) {
		if !suspended {
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

	desired, err := s.desired(owner, existing, render)
	if err != nil {
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

// desired renders, sets the controller owner reference and the hashes.
func (s *Syncer) desired(owner client.Object, existing *jobsetv1alpha2.JobSet, render RenderFunc) (*jobsetv1alpha2.JobSet, error) {
	js, err := render(existing)
	if err != nil {
		return nil, err
	}
	if err := controllerutil.SetControllerReference(owner, js, s.Client.Scheme()); err != nil {
		return nil, fmt.Errorf("setting owner of JobSet %s: %w", js.Name, err)
	}
	if _, err := Hashes(js); err != nil {
		return nil, err
	}
	return js, nil
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

func hashJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("hashing rendered JobSet: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12]), nil
}

// apply server-side applies the JobSet with the field owner.
func (s *Syncer) apply(ctx context.Context, js *jobsetv1alpha2.JobSet) error {
	u, err := ToUnstructured(js)
	if err != nil {
		return err
	}
	if err := s.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(s.FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying JobSet %s: %w", js.Name, err)
	}
	return nil
}

// ToUnstructured converts a typed object for server-side apply, dropping what
// the client does not own: status and server-set metadata.
func ToUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("converting %T for apply: %w", obj, err)
	}
	u := &unstructured.Unstructured{Object: m}
	delete(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "metadata", "resourceVersion")
	unstructured.RemoveNestedField(u.Object, "metadata", "managedFields")
	return u, nil
}

func kindOf(o client.Object) string {
	if k := o.GetObjectKind().GroupVersionKind().Kind; k != "" {
		return k
	}
	return fmt.Sprintf("%T", o)
}
