package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	trruntime "github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
	"github.com/trainyard/trainyard/pkg/validation"
)

// errJobSetNotOwned: a JobSet with the TrainJob's name exists but belongs to
// someone else. Trainyard never touches it.
var errJobSetNotOwned = errors.New("JobSet not owned by this TrainJob")

// syncAction says what syncJobSet did, for events.
type syncAction string

const (
	actionNone      syncAction = ""
	actionCreated   syncAction = EventJobSetCreated
	actionUpdated   syncAction = EventJobSetUpdated
	actionRecreated syncAction = EventJobSetRecreated
	actionSuspended syncAction = EventSuspended
	actionResumed   syncAction = EventResumed
)

// syncJobSet makes the JobSet match the TrainJob:
//   - no JobSet: render from the live runtime and create it (the snapshot of the
//     runtime goes with it);
//   - a running JobSet is never re-rendered (JobSet forbids it); it is only
//     suspended when the TrainJob is;
//   - a suspended JobSet is re-rendered from its snapshot and applied when the
//     rendering changed (Kueue's node selectors on admission, a resume), or
//     recreated when a part JobSet keeps immutable changed.
//
// It returns the JobSet as it now is.
func (r *TrainJobReconciler) syncJobSet(ctx context.Context, job *trainer.TrainJob, js *jobsetv1alpha2.JobSet) (*jobsetv1alpha2.JobSet, syncAction, error) {
	if js == nil {
		rt, err := resolveRuntime(ctx, r.Client, job)
		if err != nil {
			return nil, actionNone, err
		}
		desired, err := r.render(job, rt)
		if err != nil {
			return nil, actionNone, err
		}
		// Create, not apply: if our cache has not seen a JobSet we created a moment
		// ago, this fails with AlreadyExists instead of re-rendering it from a runtime
		// that may have changed since.
		if err := r.Create(ctx, desired, client.FieldOwner(FieldOwner)); err != nil {
			return nil, actionNone, fmt.Errorf("creating JobSet %s: %w", desired.Name, err)
		}
		return desired, actionCreated, nil
	}
	if !metav1IsControlledBy(js, job) {
		return js, actionNone, fmt.Errorf("%w: JobSet %s/%s already exists and is not controlled by TrainJob %s; delete or rename one of them",
			errJobSetNotOwned, js.Namespace, js.Name, job.Name)
	}

	if !ptr.Deref(js.Spec.Suspend, false) {
		if !trruntime.Suspended(job) {
			return js, actionNone, nil
		}
		// Only the suspend flag changes on a running JobSet; the pod template is
		// updated once the JobSet is suspended, which JobSet allows.
		patch := client.RawPatch(client.Merge.Type(), []byte(`{"spec":{"suspend":true}}`))
		if err := r.Patch(ctx, js, patch, client.FieldOwner(FieldOwner)); err != nil {
			return js, actionNone, fmt.Errorf("suspending JobSet %s: %w", js.Name, err)
		}
		return js, actionSuspended, nil
	}

	rt, err := snapshotOf(js)
	if err != nil {
		// A JobSet without a readable snapshot (made by hand, or by an older
		// version) is rendered from the live runtime.
		if rt, err = resolveRuntime(ctx, r.Client, job); err != nil {
			return js, actionNone, err
		}
	}
	desired, err := r.render(job, rt)
	if err != nil {
		return js, actionNone, err
	}
	if desired.Annotations[RenderHashAnnotation] == js.Annotations[RenderHashAnnotation] {
		return js, actionNone, nil
	}
	action := actionUpdated
	if !trruntime.Suspended(job) {
		action = actionResumed
	}
	if desired.Annotations[TemplateHashAnnotation] != js.Annotations[TemplateHashAnnotation] {
		// JobSet keeps most of its template immutable even while suspended. A
		// suspended JobSet runs no pods, so replacing it loses nothing.
		if err := r.Delete(ctx, js, client.PropagationPolicy("Background"), client.Preconditions{UID: &js.UID}); err != nil && !apierrors.IsNotFound(err) {
			return js, actionNone, fmt.Errorf("deleting JobSet %s to recreate it: %w", js.Name, err)
		}
		if err := r.Create(ctx, desired, client.FieldOwner(FieldOwner)); err != nil {
			return nil, actionNone, fmt.Errorf("recreating JobSet %s: %w", desired.Name, err)
		}
		return desired, actionRecreated, nil
	}
	if err := r.apply(ctx, desired); err != nil {
		return js, actionNone, err
	}
	return desired, action, nil
}

// render runs the pipeline and returns the JobSet to write, owned by the TrainJob
// and annotated with the runtime snapshot and the hashes syncJobSet compares.
func (r *TrainJobReconciler) render(job *trainer.TrainJob, rt *trruntime.Runtime) (*jobsetv1alpha2.JobSet, error) {
	// The admission webhook runs these checks too; running them here reports bad
	// input in status when the webhook is not installed.
	if errs := append(validation.ValidateTrainJob(nil, job), validation.ValidatePodNames(job, rt)...); len(errs) > 0 {
		return nil, &framework.InvalidError{Errs: errs}
	}
	objs, err := r.Framework.Build(job, rt)
	if err != nil {
		return nil, err
	}
	var js *jobsetv1alpha2.JobSet
	for _, o := range objs {
		if j, ok := o.(*jobsetv1alpha2.JobSet); ok {
			js = j
		}
	}
	if js == nil || len(objs) != 1 {
		return nil, fmt.Errorf("pipeline returned %d objects; this version of Trainyard writes exactly one JobSet", len(objs))
	}
	if err := controllerutil.SetControllerReference(job, js, r.Scheme()); err != nil {
		return nil, fmt.Errorf("setting owner of JobSet %s: %w", js.Name, err)
	}
	snap, err := rt.Encode()
	if err != nil {
		return nil, err
	}
	if js.Annotations == nil {
		js.Annotations = map[string]string{}
	}
	js.Annotations[SnapshotAnnotation] = snap
	tmplHash, err := templateHash(js)
	if err != nil {
		return nil, err
	}
	js.Annotations[TemplateHashAnnotation] = tmplHash
	renderHash, err := hashJSON(struct {
		Labels, Annotations map[string]string
		Spec                jobsetv1alpha2.JobSetSpec
	}{js.Labels, js.Annotations, js.Spec})
	if err != nil {
		return nil, err
	}
	js.Annotations[RenderHashAnnotation] = renderHash
	return js, nil
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

func snapshotOf(js *jobsetv1alpha2.JobSet) (*trruntime.Runtime, error) {
	s, ok := js.Annotations[SnapshotAnnotation]
	if !ok {
		return nil, fmt.Errorf("JobSet %s has no %s annotation", js.Name, SnapshotAnnotation)
	}
	return trruntime.DecodeRuntime(s)
}

// apply server-side applies the JobSet with Trainyard's field owner.
func (r *TrainJobReconciler) apply(ctx context.Context, js *jobsetv1alpha2.JobSet) error {
	u, err := toUnstructured(js)
	if err != nil {
		return err
	}
	if err := r.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying JobSet %s: %w", js.Name, err)
	}
	return nil
}

// toUnstructured converts a typed object for server-side apply, dropping what
// the client does not own: status and server-set metadata.
func toUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
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
