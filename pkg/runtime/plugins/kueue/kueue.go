// Package kueue admits a TrainJob's nodes as one gang through Kueue: all of them
// or none. Kueue can be set up in two ways, and the plugin follows the one the
// cluster uses (the manager's --kueue-mode):
//
//   - ModeTrainJob: Kueue's built-in TrainJob integration manages queued
//     TrainJobs itself (it suspends them, and on admission writes node selectors
//     and tolerations into podTemplateOverrides before resuming them). Trainyard
//     honours that through the TrainJob, and keeps the JobSet out of Kueue's
//     JobSet integration so that the job is not queued twice.
//   - ModeJobSet: Kueue's TrainJob integration is off. The plugin hands the
//     child JobSet to Kueue: the queue and priority labels go on the JobSet, the
//     JobSet is created suspended, and from then on Kueue alone starts, stops
//     and places it; Trainyard never unsuspends or re-renders it.
package kueue

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
)

// Name of the plugin.
const Name = "Kueue"

// Kueue's labels.
const (
	QueueNameLabel     = "kueue.x-k8s.io/queue-name"
	PriorityClassLabel = "kueue.x-k8s.io/priority-class"
)

// Mode says how Kueue is set up.
type Mode string

const (
	// ModeTrainJob means Kueue's TrainJob integration manages TrainJobs.
	ModeTrainJob Mode = "trainjob"
	// ModeJobSet means Kueue manages the child JobSets.
	ModeJobSet Mode = "jobset"
)

// ParseMode checks a mode name.
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case ModeTrainJob, ModeJobSet:
		return Mode(s), nil
	}
	return "", fmt.Errorf("unknown Kueue mode %q: want %s or %s", s, ModeTrainJob, ModeJobSet)
}

// Kueue is the plugin.
type Kueue struct {
	mode Mode
}

var (
	_ framework.PodGroupPolicyPlugin = (*Kueue)(nil)
	_ framework.ValidatePlugin       = (*Kueue)(nil)
)

// New returns the plugin for a mode.
func New(mode Mode) *Kueue { return &Kueue{mode: mode} }

// Name implements framework.Plugin.
func (*Kueue) Name() string { return Name }

// Mode is the mode the plugin runs in.
func (k *Kueue) Mode() Mode { return k.mode }

// Validate rejects an empty queue name, which Kueue would ignore silently.
func (k *Kueue) Validate(_ *runtime.Info, req *runtime.Request) field.ErrorList {
	if q, ok := req.Labels[QueueNameLabel]; ok && q == "" {
		return field.ErrorList{field.Invalid(req.Paths.Labels.Key(QueueNameLabel), q, "must name a LocalQueue")}
	}
	return nil
}

// EnforcePodGroupPolicy puts the JobSet in Kueue's hands (ModeJobSet), or keeps
// it out of them when Kueue queues the TrainJob itself (ModeTrainJob). Whatever
// the mode, a JobSet that ends up with a queue label is Kueue's to start: it is
// created suspended and Trainyard never unsuspends it. (A v2.1 TrainJob may put
// the queue label on the JobSet through spec.labels, the way Kueue queued
// TrainJobs before it had a TrainJob integration.)
func (k *Kueue) EnforcePodGroupPolicy(info *runtime.Info, req *runtime.Request) error {
	queue := req.Labels[QueueNameLabel]
	switch {
	case k.mode == ModeJobSet && queue != "":
		info.Labels = withLabel(info.Labels, QueueNameLabel, queue)
		if p := req.Labels[PriorityClassLabel]; p != "" {
			info.Labels = withLabel(info.Labels, PriorityClassLabel, p)
		}
	case k.mode == ModeTrainJob && queue != "":
		// Kueue queues the TrainJob; the same label on its JobSet would queue
		// the job a second time.
		info.Labels = without(info.Labels, QueueNameLabel, PriorityClassLabel)
	}
	info.QueueName = info.Labels[QueueNameLabel]
	return nil
}

func withLabel(m map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for a, b := range m {
		out[a] = b
	}
	out[k] = v
	return out
}

func without(m map[string]string, keys ...string) map[string]string {
	out := make(map[string]string, len(m))
	for a, b := range m {
		out[a] = b
	}
	for _, k := range keys {
		delete(out, k)
	}
	return out
}
