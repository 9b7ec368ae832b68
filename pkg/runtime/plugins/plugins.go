// Package plugins declares Trainyard's runtime plugins and the one order in
// which every extension point runs them.
package plugins

import (
	"github.com/trainyard/trainyard/pkg/runtime/framework"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/jobset"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/plainml"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/resources"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/torch"
)

// Ordered returns the plugins in the order they run:
//   - Resources first, so that ML-policy plugins see the merged resources;
//   - then the ML policies (Torch; PlainML for runtimes with no framework policy);
//   - gang-scheduling plugins (PodGroupPolicy) come next, when added;
//   - JobSet last: it emits the JobSet from the finished Info and reads status back.
func Ordered() []framework.Plugin {
	return []framework.Plugin{
		resources.New(),
		torch.New(),
		plainml.New(),
		jobset.New(),
	}
}

// NewFramework returns a framework with the declared plugins.
func NewFramework() (*framework.Framework, error) {
	return framework.New(Ordered()...)
}
