package jobframework

import (
	"context"
	"flag"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainyard/trainyard/pkg/runtime"
)

// Kind is one job kind of the manager, with everything it brings: its API
// types, its own settings (flags named after it), the child kinds its plans
// have, its controller, its webhooks and its metrics. pkg/controller.Kinds
// lists the kinds: a new one is a package implementing Kind plus one line
// there.
type Kind interface {
	// Name names the kind in flags and logs, lower case ("pytorchjob").
	Name() string
	// AddToScheme adds the kind's API types to the manager's scheme.
	AddToScheme(s *k8sruntime.Scheme) error
	// BindFlags adds the kind's own settings to fs, each named after the
	// kind (--<name>-concurrency, ...), so that no setting of one kind
	// reaches another.
	BindFlags(fs *flag.FlagSet)
	// Validate checks the kind's settings once the flags are parsed, so
	// that a bad one stops the manager before it connects to anything.
	Validate() error
	// Enabled says whether the manager runs the kind. A disabled kind
	// registers nothing: no controller, no webhook, no metric.
	Enabled() bool
	// Owned lists the child kinds its plans may have, whatever its
	// settings (the manager's cache settings are made before the manager).
	Owned() []client.Object
	// SetupWithManager registers the kind's controller and metrics.
	SetupWithManager(m *Manager) error
	// SetupWebhooks registers the kind's admission webhooks (none: nil).
	SetupWebhooks(m *Manager) error
}

// Typed is a kind that names its job object. The manager caches the jobs
// of every kind whole; when one kind's jobs are another kind's children (an
// OptimizationJob's trials are TrainJobs), CacheOptions must not narrow that
// child kind to the objects Trainyard labelled as its own, or the kind's
// own controller would never see its users' jobs.
type Typed interface {
	// JobObject returns an empty job object of the kind.
	JobObject() client.Object
}

// JobObjects lists the job objects of the Typed kinds, enabled or not (the
// cache settings are made before the manager).
func JobObjects(kinds []Kind) []client.Object {
	var out []client.Object
	for _, k := range kinds {
		if t, ok := k.(Typed); ok {
			out = append(out, t.JobObject())
		}
	}
	return out
}

// Manager is a controller-runtime manager with what the job kinds share on
// it: the Prometheus registry their metrics go to, what every kind may need
// to know of the cluster and of the manager's own servers (set by the
// manager's command before the kinds are set up), and the cache indexes
// already registered (the controllers of several kinds index the same pods,
// JobSets and Workloads, and a second registration of an index fails). It
// belongs to one manager: nothing is kept across managers.
type Manager struct {
	ctrl.Manager
	// Metrics is where the kinds register their metrics (the manager's
	// endpoint serves controller-runtime's registry; tests pass their own).
	Metrics prometheus.Registerer
	// ClusterDomain is the cluster's DNS domain (--cluster-domain; by
	// default runtime.DefaultClusterDomain): the fully qualified names a
	// kind gives its pods (an elastic torch job's rendezvous, Flux's
	// brokers, v1's cluster specs) end in it.
	ClusterDomain string
	// StatusServerURL is where trainer pods reach the manager's status
	// server (scheme, host and port; "": it is off).
	StatusServerURL string

	mu      sync.Mutex
	indexed map[string]bool
	blind   *blindWriter
}

// writer is the manager's blindWriter, made on first use; nil for a manager
// without a REST config (a test's).
func (m *Manager) writer() *blindWriter {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.blind == nil && m.GetConfig() != nil && m.GetHTTPClient() != nil {
		m.blind = newBlindWriter(m.GetConfig(), m.GetHTTPClient(), m.GetRESTMapper(), m.GetScheme())
	}
	return m.blind
}

// NewManager wraps mgr, for a cluster whose DNS domain is the default;
// metrics nil means a registry of its own that nothing serves.
func NewManager(mgr ctrl.Manager, metrics prometheus.Registerer) *Manager {
	if metrics == nil {
		metrics = prometheus.NewRegistry()
	}
	return &Manager{Manager: mgr, Metrics: metrics, ClusterDomain: runtime.DefaultClusterDomain, indexed: map[string]bool{}}
}

// indexOnce registers a cache index once on this manager.
func (m *Manager) indexOnce(obj client.Object, name string, fn client.IndexerFunc) error {
	gvk, err := m.GetClient().GroupVersionKindFor(obj)
	if err != nil {
		return err
	}
	key := gvk.String() + "/" + name
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.indexed[key] {
		return nil
	}
	if err := m.GetFieldIndexer().IndexField(context.Background(), obj, name, fn); err != nil {
		return err
	}
	m.indexed[key] = true
	return nil
}

// AddToScheme adds the API types of every kind, enabled or not (a disabled
// kind's objects may still be children or owners the cache decodes).
func AddToScheme(s *k8sruntime.Scheme, kinds []Kind) error {
	for _, k := range kinds {
		if err := k.AddToScheme(s); err != nil {
			return fmt.Errorf("adding %s's types to the scheme: %w", k.Name(), err)
		}
	}
	return nil
}

// BindFlags adds every kind's settings to fs.
func BindFlags(fs *flag.FlagSet, kinds []Kind) {
	for _, k := range kinds {
		k.BindFlags(fs)
	}
}

// Validate checks the settings of every enabled kind.
func Validate(kinds []Kind) error {
	for _, k := range kinds {
		if !k.Enabled() {
			continue
		}
		if err := k.Validate(); err != nil {
			return fmt.Errorf("%s settings: %w", k.Name(), err)
		}
	}
	return nil
}

// Owned lists the child kinds of the enabled kinds.
func Owned(kinds []Kind) []client.Object {
	var out []client.Object
	for _, k := range kinds {
		if k.Enabled() {
			out = append(out, k.Owned()...)
		}
	}
	return out
}

// SetupControllers registers the controller of every enabled kind, in order.
func SetupControllers(m *Manager, kinds []Kind) error {
	for _, k := range kinds {
		if !k.Enabled() {
			ctrl.Log.WithName("setup").Info("Job kind disabled: no controller, webhook or metric", "kind", k.Name())
			continue
		}
		if err := k.SetupWithManager(m); err != nil {
			return fmt.Errorf("setting up the %s controller: %w", k.Name(), err)
		}
	}
	return nil
}

// SetupWebhooks registers the webhooks of every enabled kind, in order.
func SetupWebhooks(m *Manager, kinds []Kind) error {
	for _, k := range kinds {
		if !k.Enabled() {
			continue
		}
		if err := k.SetupWebhooks(m); err != nil {
			return fmt.Errorf("%s webhooks: %w", k.Name(), err)
		}
	}
	return nil
}
