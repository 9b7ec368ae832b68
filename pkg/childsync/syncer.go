// Package childsync is the one place that writes a job's children: it applies
// a plan.Plan (the JobSet, ConfigMaps, Secrets, PodGroups, Services, ... that
// the runtime pipeline produced) for any job kind, each child by its rule
// (see package plan). It sets the owner reference and the managed-by label on
// every child, and skips writes whose rendering did not change (by hash), so
// that a pass over an unchanged job writes nothing.
package childsync

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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/trainyard/trainyard/pkg/plan"
)

// Names Trainyard keeps on the children it owns.
const (
	// RenderHashAnnotation is the hash of the whole rendered child: equal
	// means nothing to apply.
	RenderHashAnnotation = "trainyard.io/render-hash"
	// TemplateHashAnnotation (JobSets) is the hash of the parts of the JobSet
	// that JobSet never lets change, even while suspended: different means
	// recreate.
	TemplateHashAnnotation = "trainyard.io/template-hash"
	// ManagedByLabel marks every child Trainyard writes, so that the manager
	// caches only its own ConfigMaps, Secrets, Services, ... (value ManagedBy).
	ManagedByLabel = "trainyard.io/managed-by"
	// ManagedBy is the value of ManagedByLabel.
	ManagedBy = "trainyard"
)

// ErrNotOwned means a child with the planned name exists but belongs to someone
// else. It is never touched.
var ErrNotOwned = errors.New("child not owned")

// ExistsError is a create refused because an object of the child's kind and
// name exists that the pass did not observe as the owner's child: the cache
// is behind (it is the owner's), or someone else holds the name. The syncer
// does not read to tell which: the next pass observes the object by its key
// (taken) and either finds it the owner's child or reports ErrNotOwned.
type ExistsError struct {
	Key Key
	Err error
}

func (e *ExistsError) Error() string { return e.Err.Error() }
func (e *ExistsError) Unwrap() error { return e.Err }

// ErrKindNotServed means the plan has a child whose kind the cluster does not serve
// (its CRD was not installed when the manager started).
var ErrKindNotServed = errors.New("kind not served")

// Action says what happened to one child.
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

// Key identifies a child of one owner: its kind and name (children live in
// the owner's namespace).
type Key struct {
	schema.GroupKind
	Name string
}

// String is "<kind>.<group>/<name>".
func (k Key) String() string { return k.GroupKind.String() + "/" + k.Name }

// Children are the observed children of one owner, by key.
type Children map[Key]client.Object

// Result says what Sync did, child by child, and what the children now are.
type Result struct {
	// Actions holds the action taken for each child that was written.
	Actions map[Key]Action
	// Children are the children as they now are: the observed ones, updated
	// with what this pass wrote.
	Children Children
}

// Action returns what was done to the child of this kind and name.
func (r Result) Action(gk schema.GroupKind, name string) Action {
	return r.Actions[Key{GroupKind: gk, Name: name}]
}

// Syncer writes children with one field owner.
type Syncer struct {
	Client     client.Client
	FieldOwner string
	// Served reports whether the cluster serves a kind; nil means every kind.
	Served func(schema.GroupKind) bool
	// Create, when set, creates a child in place of Client.Create, without
	// reading the API server's answer back into it (the manager's: the
	// next pass observes the child from the cache).
	Create func(ctx context.Context, obj client.Object, fieldOwner string) error
}

// KeyOf returns the key of obj, with its kind from the client's scheme.
func (s *Syncer) KeyOf(obj client.Object) (Key, error) {
	gvk, err := s.Client.GroupVersionKindFor(obj)
	if err != nil {
		return Key{}, fmt.Errorf("kind of %T: %w", obj, err)
	}
	return Key{GroupKind: gvk.GroupKind(), Name: obj.GetName()}, nil
}

// Sync applies p for owner, child by child in the plan's order, given the
// children observed at the start of the pass and the objects observed under a
// planned child's key that owner does not control (taken: ErrNotOwned, never
// touched). A plan with a child of a kind
// the cluster does not serve writes nothing (a job never runs without, say,
// its gang). It stops at the first error: a later child may depend on an
// earlier one (a Service before the pods that look it up).
func (s *Syncer) Sync(ctx context.Context, owner client.Object, p *plan.Plan, observed, taken Children) (Result, error) {
	res := Result{Actions: map[Key]Action{}, Children: Children{}}
	for k, v := range observed {
		res.Children[k] = v
	}
	keys := make([]Key, len(p.Children))
	for i, child := range p.Children {
		key, err := s.KeyOf(child.Object)
		if err != nil {
			return res, err
		}
		if s.Served != nil && !s.Served(key.GroupKind) {
			return res, fmt.Errorf("%w: %s %s needs %s, which this cluster does not serve; install its CRD and restart the Trainyard manager",
				ErrKindNotServed, s.kindOf(owner), owner.GetName(), key.GroupKind)
		}
		keys[i] = key
	}
	for i, child := range p.Children {
		desired, key := child.Object, keys[i]
		if err := s.own(owner, desired); err != nil {
			return res, err
		}
		if t, ok := taken[key]; ok && observed[key] == nil && !metav1.IsControlledBy(t, owner) {
			return res, s.notOwned(owner, t)
		}
		current := observed[key]
		var now client.Object
		var action Action
		var err error
		switch child.Rule {
		case plan.RuleJobSet:
			js, ok := desired.(*jobsetv1alpha2.JobSet)
			if !ok {
				return res, fmt.Errorf("plan rule %s on a %T", child.Rule, desired)
			}
			now, action, err = s.syncJobSet(ctx, p.Suspended, js, current)
		case plan.RuleCreateOnce:
			now, action, err = s.createOnce(ctx, child, current)
		case plan.RuleApply:
			now, action, err = s.applyChild(ctx, desired, current)
		case plan.RuleApplyWhileSuspended:
			if current != nil && !p.Suspended {
				now = current // running: the scheduler's, not ours to change
				break
			}
			now, action, err = s.applyChild(ctx, desired, current)
		default:
			err = fmt.Errorf("unknown plan rule %q for %s", child.Rule, key)
		}
		if now != nil {
			res.Children[key] = now
		}
		if action != None {
			res.Actions[key] = action
		}
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// own sets the controller owner reference and the managed-by label.
func (s *Syncer) own(owner, obj client.Object) error {
	if err := controllerutil.SetControllerReference(owner, obj, s.Client.Scheme()); err != nil {
		return fmt.Errorf("setting owner of %s: %w", obj.GetName(), err)
	}
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[ManagedByLabel] = ManagedBy
	obj.SetLabels(labels)
	return nil
}

// create creates obj. An AlreadyExists is an *ExistsError: whose the object
// is, the next pass observes.
func (s *Syncer) create(ctx context.Context, obj client.Object) error {
	var err error
	if s.Create != nil {
		err = s.Create(ctx, obj, s.FieldOwner)
	} else {
		err = s.Client.Create(ctx, obj, client.FieldOwner(s.FieldOwner))
	}
	if err == nil {
		return nil
	}
	err = fmt.Errorf("creating %s %s: %w", s.kindOf(obj), obj.GetName(), err)
	if apierrors.IsAlreadyExists(err) {
		key, kerr := s.KeyOf(obj)
		if kerr != nil {
			return errors.Join(err, kerr)
		}
		return &ExistsError{Key: key, Err: err}
	}
	return err
}

// notOwned is the ErrNotOwned of an object someone else holds the name of.
func (s *Syncer) notOwned(owner, existing client.Object) error {
	return fmt.Errorf("%w: %s %s/%s already exists and is not controlled by %s %s; delete or rename one of them",
		ErrNotOwned, s.kindOf(existing), owner.GetNamespace(), existing.GetName(), s.kindOf(owner), owner.GetName())
}

// createOnce applies plan.RuleCreateOnce; the child's BeforeCreate runs only
// when the object is about to be created.
func (s *Syncer) createOnce(ctx context.Context, child plan.Child, current client.Object) (client.Object, Action, error) {
	if current != nil {
		return current, None, nil
	}
	desired := child.Object
	if child.BeforeCreate != nil {
		if err := child.BeforeCreate(desired); err != nil {
			return nil, None, fmt.Errorf("preparing %s %s: %w", s.kindOf(desired), desired.GetName(), err)
		}
	}
	if err := s.create(ctx, desired); err != nil {
		return nil, None, err
	}
	return desired, Created, nil
}

// applyChild applies plan.RuleApply: server-side apply when the rendering
// changed, creating the child when absent.
func (s *Syncer) applyChild(ctx context.Context, desired, current client.Object) (client.Object, Action, error) {
	u, err := ToUnstructured(desired)
	if err != nil {
		return current, None, err
	}
	// The hash covers everything applied but itself (and the same whether or
	// not the desired object already carries it).
	unstructured.RemoveNestedField(u.Object, "metadata", "annotations", RenderHashAnnotation)
	if len(u.GetAnnotations()) == 0 {
		unstructured.RemoveNestedField(u.Object, "metadata", "annotations")
	}
	hash, err := hashJSON(u.Object)
	if err != nil {
		return current, None, err
	}
	ann := desired.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[RenderHashAnnotation] = hash
	desired.SetAnnotations(ann)
	if current != nil && current.GetAnnotations()[RenderHashAnnotation] == hash {
		return current, None, nil
	}
	if current == nil {
		if err := s.create(ctx, desired); err != nil {
			return nil, None, err
		}
		return desired, Created, nil
	}
	if err := s.apply(ctx, desired); err != nil {
		return current, None, err
	}
	return desired, Updated, nil
}

// apply server-side applies obj with the field owner.
func (s *Syncer) apply(ctx context.Context, obj client.Object) error {
	u, err := ToUnstructured(obj)
	if err != nil {
		return err
	}
	if u.GetAPIVersion() == "" {
		gvk, err := s.Client.GroupVersionKindFor(obj)
		if err != nil {
			return fmt.Errorf("kind of %T: %w", obj, err)
		}
		u.SetGroupVersionKind(gvk)
	}
	if err := s.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(s.FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying %s %s: %w", s.kindOf(obj), obj.GetName(), err)
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

func hashJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("hashing rendered child: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12]), nil
}

// kindOf names obj's kind for messages, from the scheme when its TypeMeta is empty.
func (s *Syncer) kindOf(o client.Object) string {
	if k := o.GetObjectKind().GroupVersionKind().Kind; k != "" {
		return k
	}
	if gvk, err := s.Client.GroupVersionKindFor(o); err == nil {
		return gvk.Kind
	}
	return fmt.Sprintf("%T", o)
}
