package statusserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/childsync"
)

// The CA ConfigMap of each namespace with TrainJobs; the manager deletes no
// other ConfigMap (its jobs' go with them, by owner reference).
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=delete,resourceNames=trainyard-status-server-ca
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainjobs,verbs=get;list;watch

const (
	// CAConfigMapName is the ConfigMap that carries the status server's CA
	// (key CAKey) in every namespace that has TrainJobs: the TrainJobStatus
	// plugin projects it into trainer pods. It is one per namespace, as
	// kube-root-ca.crt is, not one per TrainJob (upstream's <tj>-tls-config):
	// a job then costs no write of its own for it, and a rotated CA is one
	// write per namespace that reaches running pods as well.
	CAConfigMapName = "trainyard-status-server-ca"
	// CAKey is the key of the PEM bundle in CAConfigMapName.
	CAKey = "ca.crt"
	// CAHashAnnotation is a hash of the bundle the ConfigMap holds: the
	// manager caches ConfigMaps without their data.
	CAHashAnnotation = "trainyard.io/ca-hash"
	// CAFieldManager is the field manager of the publisher's writes: a
	// ConfigMap it did not write is not the publisher's.
	CAFieldManager = "trainyard-status-server-ca"
)

// CAPublisher keeps CAConfigMapName in each namespace while it has a
// TrainJob: created with the first, updated when the CA changes, deleted
// with the last. It is a controller of its own, beside the job pipeline (as
// kube-controller-manager publishes kube-root-ca.crt): the ConfigMap belongs
// to no job, so no job's plan writes it.
//
// Whoever may write ConfigMaps in a namespace may write this one too, and
// the cache holds neither its data nor its managedFields: a hash annotation
// that says "current" proves nothing. So the publisher remembers the
// resourceVersion of its own last write (or check) of each, and reads a
// ConfigMap that changed since (or that it has not checked since it started)
// from the API server: it repairs a planted CA, and it patches and deletes
// only ConfigMaps it wrote (its label and its field manager), never one a
// user made under that name.
type CAPublisher struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// Live reads from the API server (data and managedFields included);
	// default Client.
	Live client.Reader
	CA   *CABundle
	Log  logr.Logger

	mu    sync.Mutex
	known map[types.NamespacedName]seen
}

// seen is what the publisher knows of a ConfigMap at a resourceVersion.
type seen struct {
	resourceVersion string
	// ours: it carries the publisher's label and field manager; current:
	// it holds the CA it held when the publisher last wrote or read it.
	ours bool
}

// SetupWithManager registers the publisher: its requests are the key of the
// ConfigMap (namespace, CAConfigMapName).
func (p *CAPublisher) SetupWithManager(mgr ctrl.Manager) error {
	onlyOurs := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == CAConfigMapName })
	// A TrainJob matters when it comes and when it goes, never in between.
	comesOrGoes := predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }}
	return ctrl.NewControllerManagedBy(mgr).Named("status-server-ca").
		Watches(&trainer.TrainJob{}, handler.EnqueueRequestsFromMapFunc(caKeyOf), builder.WithPredicates(comesOrGoes)).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(caKeyOf), builder.WithPredicates(onlyOurs)).
		WatchesRawSource(source.Func(p.onCAChange)).
		Complete(p)
}

func caKeyOf(_ context.Context, o client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: CAConfigMapName}}}
}

// onCAChange queues every namespace with TrainJobs or a CA ConfigMap each
// time the bundle changes (its first load included). It subscribes before
// the controller's workers start, and again before each listing, so that no
// change falls between a pass that saw the old bundle and the next wait.
func (p *CAPublisher) onCAChange(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	changed := p.CA.Changed()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
			changed = p.CA.Changed()
			keys, err := p.namespaces(ctx)
			if err != nil {
				p.Log.Error(err, "Listing the namespaces to publish the status server CA in")
			}
			for _, k := range keys {
				q.Add(k)
			}
		}
	}()
	return nil
}

func (p *CAPublisher) namespaces(ctx context.Context) ([]reconcile.Request, error) {
	seen := map[string]bool{}
	var jobs trainer.TrainJobList
	if err := p.Client.List(ctx, &jobs, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing TrainJobs: %w", err)
	}
	for i := range jobs.Items {
		seen[jobs.Items[i].Namespace] = true
	}
	var cms corev1.ConfigMapList // the cache holds Trainyard's ConfigMaps only
	if err := p.Client.List(ctx, &cms, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing ConfigMaps: %w", err)
	}
	for i := range cms.Items {
		if cms.Items[i].Name == CAConfigMapName {
			seen[cms.Items[i].Namespace] = true
		}
	}
	out := make([]reconcile.Request, 0, len(seen))
	for ns := range seen {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: CAConfigMapName}})
	}
	return out, nil
}

// Reconcile makes the namespace's CA ConfigMap what its TrainJobs and the
// current CA call for.
func (p *CAPublisher) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var jobs trainer.TrainJobList
	if err := p.Client.List(ctx, &jobs, client.InNamespace(req.Namespace), client.Limit(1), client.UnsafeDisableDeepCopy); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing TrainJobs in %s: %w", req.Namespace, err)
	}
	var cm corev1.ConfigMap
	exists := true
	if err := p.Client.Get(ctx, req.NamespacedName, &cm); apierrors.IsNotFound(err) {
		exists = false
	} else if err != nil {
		return reconcile.Result{}, fmt.Errorf("reading ConfigMap %s: %w", req, err)
	}
	ca := p.CA.Get()
	current := exists && cm.Annotations[CAHashAnnotation] == caHash(ca)
	if exists {
		k, known := p.lookup(req.NamespacedName)
		if !known || k.resourceVersion != cm.ResourceVersion {
			// Written by someone else since the publisher's last write, or
			// not checked since the manager started: read what it holds.
			var err error
			if exists, current, err = p.check(ctx, req.NamespacedName, ca); err != nil {
				return reconcile.Result{}, err
			}
			k, _ = p.lookup(req.NamespacedName)
		}
		if exists && !k.ours {
			return reconcile.Result{}, nil // not the publisher's: left as it is (logged by check)
		}
	}
	switch act := decide(len(jobs.Items) > 0, exists, current, ca); act {
	case caNone:
		return reconcile.Result{}, nil
	case caDelete:
		k, _ := p.lookup(req.NamespacedName)
		// Preconditions: a write since the check makes this a conflict, and
		// the next pass checks again.
		err := p.Client.Delete(ctx, &cm, client.Preconditions{UID: &cm.UID, ResourceVersion: &k.resourceVersion})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return reconcile.Result{}, fmt.Errorf("deleting ConfigMap %s, its namespace has no TrainJob left: %w", req, err)
		}
		if err == nil || apierrors.IsNotFound(err) {
			p.forget(req.NamespacedName)
		}
		p.Log.V(1).Info("Deleted the status server CA: no TrainJob left in the namespace", "configMap", req)
		return reconcile.Result{}, nil
	default:
		want := caConfigMap(req.NamespacedName, ca)
		var err error
		if act == caCreate {
			err = p.Client.Create(ctx, want, client.FieldOwner(CAFieldManager))
			if apierrors.IsAlreadyExists(err) {
				// Most often the cache has not shown our own create yet, and
				// the retry finds it; if it lasts, the name is someone else's.
				err = fmt.Errorf("%w (retrying: the cache may lag; if this lasts, the ConfigMap is not labelled %s=%s and trainers in this namespace cannot verify the status server until it is renamed)",
					err, childsync.ManagedByLabel, childsync.ManagedBy)
			}
		} else {
			err = p.Client.Patch(ctx, want, client.Merge, client.FieldOwner(CAFieldManager))
		}
		if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			return reconcile.Result{}, nil // its TrainJobs go with it, and the next pass sees none
		}
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("publishing the status server CA in ConfigMap %s: %w", req, err)
		}
		p.remember(req.NamespacedName, seen{resourceVersion: want.ResourceVersion, ours: true})
		p.Log.V(1).Info("Published the status server CA", "configMap", req, "action", string(act))
		return reconcile.Result{}, nil
	}
}

// check reads ConfigMap key from the API server and remembers what it is:
// whether it is the publisher's, whether it holds ca.
func (p *CAPublisher) check(ctx context.Context, key types.NamespacedName, ca []byte) (exists, current bool, err error) {
	live := p.Live
	if live == nil {
		live = p.Client
	}
	var cm corev1.ConfigMap
	if err := live.Get(ctx, key, &cm); apierrors.IsNotFound(err) {
		p.forget(key)
		return false, false, nil
	} else if err != nil {
		return false, false, fmt.Errorf("reading ConfigMap %s from the API server: %w", key, err)
	}
	ours := isOurs(&cm)
	current = cm.Data[CAKey] == string(ca) && cm.Annotations[CAHashAnnotation] == caHash(ca) && len(cm.BinaryData) == 0
	if !ours {
		p.Log.Info("A ConfigMap of the status server CA's name that the manager did not write: left as it is, trainers in this namespace verify the server with what it holds",
			"configMap", key, "resourceVersion", cm.ResourceVersion)
	} else if !current && cm.Annotations[CAHashAnnotation] == caHash(ca) {
		p.Log.Info("The status server CA ConfigMap was changed by someone else: publishing the CA again", "configMap", key)
	}
	p.remember(key, seen{resourceVersion: cm.ResourceVersion, ours: ours})
	return true, current, nil
}

// isOurs tells the publisher's ConfigMap: its label, and a field manager of
// its own among managedFields.
func isOurs(cm *corev1.ConfigMap) bool {
	if cm.Labels[childsync.ManagedByLabel] != childsync.ManagedBy {
		return false
	}
	for _, f := range cm.ManagedFields {
		if f.Manager == CAFieldManager || f.Manager == legacyFieldManager {
			return true
		}
	}
	return false
}

// legacyFieldManager is the field manager of the publisher's writes before
// it named one (the API server's default: the client's user agent up to its
// first '/', the program's name).
var legacyFieldManager = strings.SplitN(rest.DefaultKubernetesUserAgent(), "/", 2)[0]

func (p *CAPublisher) lookup(key types.NamespacedName) (seen, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.known[key]
	return s, ok
}

func (p *CAPublisher) remember(key types.NamespacedName, s seen) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.known == nil {
		p.known = map[types.NamespacedName]seen{}
	}
	p.known[key] = s
}

func (p *CAPublisher) forget(key types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.known, key)
}

type caAction string

const (
	caNone   caAction = ""
	caCreate caAction = "create"
	caUpdate caAction = "update"
	caDelete caAction = "delete"
)

// decide is what to do with a namespace's CA ConfigMap: it exists while the
// namespace has TrainJobs, with the current CA. Without a CA yet there is
// nothing to publish; its first load queues every namespace again.
func decide(hasJobs, exists, current bool, ca []byte) caAction {
	switch {
	case !hasJobs && exists:
		return caDelete
	case !hasJobs || len(ca) == 0:
		return caNone
	case !exists:
		return caCreate
	case !current:
		return caUpdate
	}
	return caNone
}

func caHash(ca []byte) string {
	sum := sha256.Sum256(ca)
	return hex.EncodeToString(sum[:12])
}

// caConfigMap is the ConfigMap that publishes ca at key.
func caConfigMap(key types.NamespacedName, ca []byte) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name: key.Name, Namespace: key.Namespace,
			Labels:      map[string]string{childsync.ManagedByLabel: childsync.ManagedBy},
			Annotations: map[string]string{CAHashAnnotation: caHash(ca)},
		},
		Data: map[string]string{CAKey: string(ca)},
	}
}
