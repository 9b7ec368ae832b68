package jobframework

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/conversion/queryparams"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// blindWriter makes the two writes every job costs (its children's creates
// and its status patches) without reading the API server's answer back
// into the object, as controller-runtime's client does: nothing of a pass
// uses the answer (the next pass observes the object from the cache, which
// the watch brings), and decoding it is the larger part of the manager's
// CPU for a new job (a JobSet carries its runtime's snapshot). Errors are
// the API server's, as the client returns them (AlreadyExists, Conflict,
// NotFound, ...).
type blindWriter struct {
	cfg        *rest.Config
	httpClient *http.Client
	mapper     apimeta.RESTMapper
	scheme     *k8sruntime.Scheme
	codecs     serializer.CodecFactory
	params     k8sruntime.ParameterCodec

	mu      sync.Mutex
	clients map[clientKey]rest.Interface
}

type clientKey struct {
	gvk          schema.GroupVersionKind
	unstructured bool
}

// newBlindWriter writes through the API server of cfg.
func newBlindWriter(cfg *rest.Config, httpClient *http.Client, mapper apimeta.RESTMapper, scheme *k8sruntime.Scheme) *blindWriter {
	return &blindWriter{cfg: cfg, httpClient: httpClient, mapper: mapper, scheme: scheme,
		codecs: serializer.NewCodecFactory(scheme), params: optionsCodec{},
		clients: map[clientKey]rest.Interface{}}
}

// optionsCodec encodes CreateOptions and PatchOptions as query parameters
// without converting them to the object's group version, as controller-runtime's
// client does: a scheme registers the meta options only for the groups whose
// AddToScheme adds them (Volcano's and the scheduler-plugins' PodGroups do not).
type optionsCodec struct{}

func (optionsCodec) EncodeParameters(obj k8sruntime.Object, _ schema.GroupVersion) (url.Values, error) {
	return queryparams.Convert(obj)
}

func (optionsCodec) DecodeParameters(url.Values, schema.GroupVersion, k8sruntime.Object) error {
	return errors.New("optionsCodec only encodes")
}

// resource is what a request about obj needs: its REST client, resource
// name and whether it is namespaced.
func (w *blindWriter) resource(obj client.Object) (rest.Interface, string, bool, error) {
	gvk, err := apiutil.GVKForObject(obj, w.scheme)
	if err != nil {
		return nil, "", false, err
	}
	mapping, err := w.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, "", false, err
	}
	_, isUnstructured := obj.(*unstructured.Unstructured)
	key := clientKey{gvk: gvk, unstructured: isUnstructured}
	w.mu.Lock()
	defer w.mu.Unlock()
	rc, ok := w.clients[key]
	if !ok {
		if rc, err = apiutil.RESTClientForGVK(gvk, isUnstructured, isUnstructured, w.cfg, w.codecs, w.httpClient); err != nil {
			return nil, "", false, fmt.Errorf("REST client of %s: %w", gvk, err)
		}
		w.clients[key] = rc
	}
	return rc, mapping.Resource.Resource, mapping.Scope.Name() == apimeta.RESTScopeNameNamespace, nil
}

// Create creates obj with fieldOwner as its field manager.
func (w *blindWriter) Create(ctx context.Context, obj client.Object, fieldOwner string) error {
	rc, resource, namespaced, err := w.resource(obj)
	if err != nil {
		return err
	}
	return rc.Post().NamespaceIfScoped(obj.GetNamespace(), namespaced).Resource(resource).Body(obj).
		VersionedParams(&metav1.CreateOptions{FieldManager: fieldOwner}, w.params).Do(ctx).Error()
}

// PatchStatus merge-patches obj's status subresource with data.
func (w *blindWriter) PatchStatus(ctx context.Context, obj client.Object, data []byte, fieldOwner string) error {
	rc, resource, namespaced, err := w.resource(obj)
	if err != nil {
		return err
	}
	return rc.Patch(types.MergePatchType).NamespaceIfScoped(obj.GetNamespace(), namespaced).Resource(resource).
		Name(obj.GetName()).SubResource("status").Body(data).
		VersionedParams(&metav1.PatchOptions{FieldManager: fieldOwner}, w.params).Do(ctx).Error()
}
