package cli

import (
	"fmt"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// KubeFlags are kubectl's connection flags: which kubeconfig, which context and
// which namespace.
type KubeFlags struct {
	Kubeconfig string
	Context    string
	Namespace  string
}

// AddTo registers the flags.
func (k *KubeFlags) AddTo(fs *pflag.FlagSet) {
	fs.StringVar(&k.Kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else in-cluster)")
	fs.StringVar(&k.Context, "context", "", "kubeconfig context to use (default: the current context)")
	fs.StringVarP(&k.Namespace, "namespace", "n", "", "namespace (default: the context's namespace, else default)")
}

// Clients talk to one cluster in one namespace.
type Clients struct {
	Client    client.Client
	Clientset kubernetes.Interface
	Namespace string
}

// Connect loads the kubeconfig as kubectl does ($KUBECONFIG, ~/.kube/config, or
// the in-cluster service account) and picks the namespace: the flag, else the
// context's, else the service account's in a pod, else "default", as the SDK does.
func (k *KubeFlags) Connect() (*Clients, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = k.Kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: k.Context}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	ns := k.Namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return nil, fmt.Errorf("reading the namespace from the kubeconfig: %w", err)
		}
	}
	return NewClients(cfg, ns)
}

// Scheme holds the kinds the CLI reads: TrainJobs, runtimes, PyTorchJobs,
// JobSets, pods, events and ConfigMaps.
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
	if err := kubeflowv1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("registering %s: %w", kubeflowv1.GroupVersion, err)
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
