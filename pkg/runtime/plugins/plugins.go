// Package plugins declares Trainyard's runtime plugins and the one order in
// which every extension point runs them.
package plugins

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/coscheduling"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/flux"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/initializer"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/jax"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/jobset"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/kueue"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/mpi"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/resources"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/torch"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/trainjobstatus"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/volcano"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/xgboost"
)

// Options configure the plugins.
type Options struct {
	// KueueMode says how Kueue is set up (default kueue.ModeTrainJob).
	KueueMode kueue.Mode
	// ClusterDomain is the cluster's DNS domain (the manager's,
	// jobframework.Manager.ClusterDomain; empty only without a manager,
	// which means runtime.DefaultClusterDomain): elastic torch jobs
	// rendezvous at a pod's fully qualified name, and Flux brokers connect
	// to each other by theirs.
	ClusterDomain string
	// StatusServerURL is where trainers report their progress (the
	// manager's status server, jobframework.Manager.StatusServerURL); ""
	// turns the trainer status injection off.
	StatusServerURL string
}

// Ordered returns the plugins in the order they run:
//   - Resources first, so that ML-policy plugins see the merged resources;
//   - then the ML policies (Torch, JAX, XGBoost, Flux; each acts only on its own policy); a runtime with no framework policy needs
//     none, and one whose policy no plugin claims is rejected by the framework;
//   - then the status server's env and token volume (TrainJobStatus), on
//     the trainer pods the ML policy shaped;
//   - then gang scheduling (Kueue; the coscheduling and Volcano PodGroups);
//   - JobSet last: it emits the JobSet from the finished Info and reads status back.
func Ordered(opts Options) []framework.Plugin {
	mode := opts.KueueMode
	if mode == "" {
		mode = kueue.ModeTrainJob
	}
	domain := opts.ClusterDomain
	if domain == "" {
		domain = runtime.DefaultClusterDomain
	}
	var progress *trainjobstatus.Config
	if opts.StatusServerURL != "" {
		progress = &trainjobstatus.Config{BaseURL: opts.StatusServerURL}
	}
	return []framework.Plugin{
		resources.New(),
		initializer.New(),
		&torch.Torch{ClusterDomain: domain},
		mpi.New(),
		jax.New(),
		xgboost.New(),
		&flux.Flux{ClusterDomain: domain},
		trainjobstatus.New(progress),
		kueue.New(mode),
		coscheduling.New(),
		volcano.New(),
		jobset.New(),
	}
}

// ForPodTemplates returns, in the order they run, the plugins of a kind
// whose runtime brings complete pod templates (the kubeflow.org/v1 kinds:
// their replica specs are the pods): gang scheduling by the runtime's
// podGroupPolicy (coscheduling, Volcano; the request's gang policy shapes
// the PodGroup) and the JobSet. Such a kind puts its own plugins (a
// PyTorchJob's Services) before these. The TrainJob's plugins for
// resources, ML policies, the status server and Kueue are not among them:
// the pods are complete, and Kueue queues such a job itself, never its
// JobSet.
func ForPodTemplates() []framework.Plugin {
	return []framework.Plugin{coscheduling.New(), volcano.New(), jobset.New()}
}

// NewFramework returns a framework with the declared plugins.
func NewFramework(opts ...Options) (*framework.Framework, error) {
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	return framework.New(Ordered(o)...)
}

// Owned lists the child kinds the TrainJob plugins emit, whatever their
// options (for the manager's cache settings, made before the framework).
func Owned() []client.Object {
	fw, err := NewFramework()
	if err != nil {
		return nil
	}
	return fw.Owns()
}
