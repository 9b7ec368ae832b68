package cli

import (
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/controller"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
)

// Clients talk to one cluster in one namespace.
type Clients struct {
	Client    client.Client
	Clientset kubernetes.Interface
	Namespace string
}

// NewKubeFlags are kubectl's connection flags (k8s.io/cli-runtime's
// ConfigFlags): --kubeconfig, --context, -n/--namespace, --server, --token,
// --as, --as-group, --request-timeout, the TLS files and so on.
func NewKubeFlags() *genericclioptions.ConfigFlags {
	return genericclioptions.NewConfigFlags(true)
}

// RESTConfig loads the kubeconfig as kubectl does ($KUBECONFIG,
// ~/.kube/config, or the in-cluster service account) with the flags'
// overrides, and picks the namespace: the flag, else the context's, else the
// service account's in a pod, else "default", as the SDK does. Unlike kubectl,
// it does not fall back to http://localhost:8080 when there is no
// configuration at all: that is an error.
func RESTConfig(flags *genericclioptions.ConfigFlags) (*rest.Config, string, error) {
	loader := flags.ToRawKubeConfigLoader()
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("loading the kubeconfig: %w", err)
	}
	if noConfiguration(flags, loader, cfg) {
		return nil, "", fmt.Errorf("loading the kubeconfig: invalid configuration: %w", clientcmd.ErrEmptyConfig)
	}
	ns, _, err := loader.Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("reading the namespace from the kubeconfig: %w", err)
	}
	return cfg, ns, nil
}

// noConfiguration reports whether cfg is only cli-runtime's default (no
// kubeconfig, no --server, not in a pod, no $KUBERNETES_MASTER).
func noConfiguration(flags *genericclioptions.ConfigFlags, loader clientcmd.ClientConfig, cfg *rest.Config) bool {
	if (flags.APIServer != nil && *flags.APIServer != "") || os.Getenv("KUBERNETES_MASTER") != "" ||
		cfg.Host != clientcmd.ClusterDefaults.Server {
		return false
	}
	raw, err := loader.RawConfig()
	return err == nil && len(raw.Clusters) == 0
}

// Connect makes the clients for the flags' cluster and namespace (RESTConfig).
func Connect(flags *genericclioptions.ConfigFlags) (*Clients, error) {
	cfg, ns, err := RESTConfig(flags)
	if err != nil {
		return nil, err
	}
	return NewClients(cfg, ns)
}

// Scheme holds the kinds the CLI reads: pods, events and ConfigMaps, runtimes,
// JobSets and every job kind's types (jobframework.AddToScheme of the one
// list of kinds).
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("registering core/v1: %w", err)
	}
	if err := eventsv1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("registering events.k8s.io/v1: %w", err)
	}
	if err := jobsetv1alpha2.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("registering %s: %w", jobsetv1alpha2.GroupVersion, err)
	}
	if err := trainer.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("registering %s: %w", trainer.GroupVersion, err)
	}
	if err := jobframework.AddToScheme(s, controller.Kinds()); err != nil {
		return nil, err
	}
	return s, nil
}

// NewClients makes the clients for a REST config.
func NewClients(cfg *rest.Config, namespace string) (*Clients, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.UserAgent == "" {
		cfg.UserAgent = "trainyard-cli"
	}
	s, err := Scheme()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, fmt.Errorf("creating the API client for %s: %w", cfg.Host, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the clientset for %s: %w", cfg.Host, err)
	}
	return &Clients{Client: c, Clientset: cs, Namespace: namespace}, nil
}
