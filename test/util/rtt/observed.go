package rtt

import (
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/trainyard/trainyard/pkg/childsync"
	"github.com/trainyard/trainyard/pkg/observe"
)

// ObservedJobSet is what a reconciler observes of a job that owns js (nil: no
// children), keyed by the JobSet's name.
func ObservedJobSet(js *jobsetv1alpha2.JobSet) *observe.Observed {
	obs := &observe.Observed{Children: childsync.Children{}}
	if js != nil {
		obs.Children[childsync.Key{GroupKind: observe.JobSetKind, Name: js.Name}] = js
	}
	return obs
}
