// Package plugins declares Trainyard's runtime plugins and the one order in
// which every extension point runs them.
package plugins

import (
	"github.com/trainyard/trainyard/pkg/runtime/framework"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/gang"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/jobset"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/plainml"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/resources"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/torch"
)

// Options configure the plugins.
type Options struct {
	// KueueMode says how Kueue is set up (default gang.ModeTrainJob).
	KueueMode gang.Mode
}

// Ordered returns the plugins in the order they run:
//   - Resources first, so that ML-policy plugins see the merged resources;
//   - then the ML policies (Torch; PlainML for runtimes with no framework policy);
//   - then gang scheduling (Kueue);
//   - JobSet last: it emits the JobSet from the finished Info and reads status back.
func Ordered(opts Options) []framework.Plugin {
	mode := opts.KueueMode
	if mode == "" {
		mode = gang.ModeTrainJob
	}
	return []framework.Plugin{
		resources.New(),
		torch.New(),
		plainml.New(),
		gang.New(mode),
		jobset.New(),
	}
}

// NewFramework returns a framework with the declared plugins.
func NewFramework(opts ...Options) (*framework.Framework, error) {
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	return framework.New(Ordered(o)...)
}
