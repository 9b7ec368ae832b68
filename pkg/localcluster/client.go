package localcluster

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

func (c *Cluster) newClient() error {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 100, 200
	c.restConfig = cfg
	scheme := c.o.Scheme
	if scheme == nil {
		scheme = Scheme()
	}
	c.client, err = client.New(cfg, client.Options{Scheme: scheme})
	return err
}

// Scheme returns a scheme with the client-go kinds, CustomResourceDefinitions,
// JobSet v1alpha2 and Trainyard's trainer.kubeflow.org/v1alpha1.
func Scheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
	utilruntime.Must(jobsetv1alpha2.AddToScheme(scheme))
	utilruntime.Must(trainer.AddToScheme(scheme))
	return scheme
}

// Apply server-side-applies objects (forcing conflicts) as the cluster's field manager.
func (c *Cluster) Apply(ctx context.Context, objs ...*unstructured.Unstructured) error {
	for _, o := range objs {
		// DeepCopy: the client writes the response (managedFields and all) into its argument.
		if err := c.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}

// ApplyFile server-side-applies every object of a YAML file.
func (c *Cluster) ApplyFile(ctx context.Context, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	objs, err := decodeYAML(b)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return c.Apply(ctx, objs...)
}

func (c *Cluster) createNamespaces(ctx context.Context, names ...string) error {
	for _, n := range names {
		ns := &corev1.Namespace{}
		ns.Name = n
		if err := c.client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", n, err)
		}
	}
	return nil
}

func base64Std(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
