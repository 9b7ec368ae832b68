package controller

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestKinds(t *testing.T) {
	var names []string
	for _, k := range Kinds() {
		names = append(names, k.Name())
	}
	if diff := cmp.Diff([]string{"trainjob", "pytorchjob", "mpijob", "xgboostjob", "optimizationjob"}, names); diff != "" {
		t.Errorf("kinds (-want +got):\n%s", diff)
	}
	if ClientOptions().Cache == nil || !ClientOptions().Cache.Unstructured {
		t.Error("ClientOptions: unstructured reads do not come from the cache")
	}
}

// discovery is an API server's discovery that serves core/v1 ConfigMaps only.
func discovery(t *testing.T) *rest.Config {
	t.Helper()
	reply := map[string]any{
		"/api":    &metav1.APIVersions{Versions: []string{"v1"}},
		"/apis":   &metav1.APIGroupList{},
		"/api/v1": &metav1.APIResourceList{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "configmaps", Namespaced: true, Kind: "ConfigMap", Verbs: metav1.Verbs{"get", "list", "watch"}}}},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := reply[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(body)
	}))
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL}
}

// The cache settings cover the served child kinds only: a kind whose CRD is
// not installed, or that the scheme does not know, is left out.
func TestCacheOptionsFor(t *testing.T) {
	s := k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	opts, err := CacheOptionsFor(discovery(t), s, []client.Object{&corev1.ConfigMap{}, &corev1.Secret{}, &unknown{}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for o := range opts.ByObject {
		switch o.(type) {
		case *corev1.ConfigMap:
			got = append(got, "ConfigMap")
		case *corev1.Secret:
			got = append(got, "Secret")
		case *unknown:
			got = append(got, "unknown")
		}
	}
	if diff := cmp.Diff([]string{"ConfigMap"}, got); diff != "" {
		t.Errorf("child kinds cached (-want +got):\n%s", diff)
	}
	if _, err := CacheOptions(discovery(t), s); err != nil {
		t.Errorf("CacheOptions of Trainyard's kinds: %v", err)
	}
	if _, err := CacheOptionsFor(&rest.Config{Host: "https://x", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("not PEM")}}, s, nil); err == nil {
		t.Error("CacheOptionsFor with a broken TLS config: no error")
	}
}

// unknown is an object kind no scheme knows.
type unknown struct {
	metav1.TypeMeta
	metav1.ObjectMeta
}

func (u *unknown) DeepCopyObject() k8sruntime.Object { c := *u; return &c }
