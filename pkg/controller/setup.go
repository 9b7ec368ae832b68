// Package controller lists Trainyard's job kinds (Kinds) and wires them into
// the manager. Every kind runs on the one generic reconciler of
// pkg/controller/jobframework, from a package of its own
// (pkg/controller/trainjob, pkg/controller/pytorchjob) that implements
// jobframework.Kind and holds everything of the kind: its types' scheme,
// settings, adapter, admission, metrics, CLI view and Helm value. What a
// kind's jobs create is the plan its runtime plugins build. This is the only
// package that imports the kinds (TestOnlyTheListImportsKinds).
package controller

import (
	"fmt"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/trainyard/trainyard/pkg/controller/jobframework"
	"github.com/trainyard/trainyard/pkg/controller/mpijob"
	"github.com/trainyard/trainyard/pkg/controller/optimizationjob"
	"github.com/trainyard/trainyard/pkg/controller/pytorchjob"
	"github.com/trainyard/trainyard/pkg/controller/trainjob"
	"github.com/trainyard/trainyard/pkg/controller/xgboostjob"
)

// Kinds returns the manager's job kinds, in the order they are set up: a new
// kind is one line here. What every kind may need beyond its own flags (the
// cluster's DNS domain, the status server's URL) is on the
// jobframework.Manager they are set up with.
func Kinds() []jobframework.Kind {
	return []jobframework.Kind{
		trainjob.NewKind(),
		pytorchjob.NewKind(),
		mpijob.NewKind(),
		xgboostjob.NewKind(),
		optimizationjob.NewKind(),
	}
}

// ClientOptions are the manager's client settings: reads of unstructured
// objects (children of kinds whose Go types Trainyard does not import, such
// as the gang schedulers' PodGroups) come from the cache too, where the
// owner index that finds a job's children lives.
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{Unstructured: true}}
}

// CacheOptions are the manager's cache settings for the children of
// Trainyard's own kinds (enabled or not) and extra ones (those of test-only
// kinds or plugins); see CacheOptionsFor.
func CacheOptions(cfg *rest.Config, scheme *k8sruntime.Scheme, extra ...client.Object) (cache.Options, error) {
	kinds := Kinds()
	var owned []client.Object
	for _, k := range kinds {
		owned = append(owned, k.Owned()...)
	}
	return CacheOptionsFor(cfg, scheme, append(owned, extra...), jobframework.JobObjects(kinds)...)
}

// CacheOptionsFor are the manager's cache settings for the given child kinds
// (see jobframework.CacheOptions), whose jobs (of the kinds' job objects,
// jobframework.JobObjects) are cached whole even where they are children.
// Kinds the cluster does not serve (a CRD that is not installed) are left
// out: the manager could not start with them.
func CacheOptionsFor(cfg *rest.Config, scheme *k8sruntime.Scheme, owned []client.Object, jobs ...client.Object) (cache.Options, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return cache.Options{}, fmt.Errorf("API client: %w", err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		return cache.Options{}, fmt.Errorf("discovering the API: %w", err)
	}
	var served []client.Object
	for _, o := range owned {
		gvk, err := apiutil.GVKForObject(o, scheme)
		if err != nil {
			continue // not in this manager's scheme: no controller asks for it
		}
		if _, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
			served = append(served, o)
		}
	}
	return jobframework.CacheOptions(served, jobs...), nil
}
