// Package volcano gang-schedules a TrainJob with Volcano (volcano.sh): a
// scheduling.volcano.sh/v1beta1 PodGroup per TrainJob holds all its pods
// (initializers and launcher included) to be bound together, in the queue the
// runtime names, and an annotation ties every pod to the group. The runtime
// chooses the scheduler (its pods' schedulerName); this plugin never sets it.
//
// The PodGroup is built as an unstructured object: volcano.sh/apis would bring
// Volcano's dependency tree into Trainyard's go.mod for a handful of fields.
package volcano

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/childsync"
	"github.com/trainyard/trainyard/pkg/observe"
	"github.com/trainyard/trainyard/pkg/plan"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
)

// +kubebuilder:rbac:groups=scheduling.volcano.sh,resources=podgroups,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=scheduling.k8s.io,resources=priorityclasses,verbs=get;list;watch

// Name of the plugin.
const Name = "Volcano"

// Volcano's names.
const (
	// GroupNameAnnotation ties a pod to its PodGroup (value: the TrainJob's name).
	GroupNameAnnotation = "scheduling.k8s.io/group-name"
	// QueueAnnotation, on the runtime's (or a patch's) JobSet template
	// metadata, names the Volcano queue of the PodGroup.
	QueueAnnotation = "scheduling.volcano.sh/queue-name"
)

// PodGroupGVK is the kind of the PodGroup.
var PodGroupGVK = schema.GroupVersionKind{Group: "scheduling.volcano.sh", Version: "v1beta1", Kind: "PodGroup"}

// Volcano is the plugin.
type Volcano struct{}

var (
	_ framework.ValidatePlugin       = (*Volcano)(nil)
	_ framework.PodGroupPolicyPlugin = (*Volcano)(nil)
	_ framework.BuildPlugin          = (*Volcano)(nil)
	_ framework.OwnerPlugin          = (*Volcano)(nil)
	_ framework.StatusPlugin         = (*Volcano)(nil)
)

// New returns the plugin.
func New() *Volcano { return &Volcano{} }

// Name implements framework.Plugin.
func (*Volcano) Name() string { return Name }

// Owns implements framework.OwnerPlugin.
func (*Volcano) Owns() []client.Object { return []client.Object{NewPodGroup()} }

// NewPodGroup returns an empty PodGroup (its kind set).
func NewPodGroup() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(PodGroupGVK)
	return u
}

func policy(info *runtime.Info) *trainer.VolcanoPodGroupPolicySource {
	if p := info.Runtime.Spec.PodGroupPolicy; p != nil {
		return p.Volcano
	}
	return nil
}

// Validate rejects an empty queue name, which Volcano would not place.
func (*Volcano) Validate(info *runtime.Info, req *runtime.Request) field.ErrorList {
	if policy(info) == nil {
		return nil
	}
	if q, ok := info.Annotations[QueueAnnotation]; ok && q == "" {
		return field.ErrorList{field.Invalid(req.Paths.Annotations.Key(QueueAnnotation), q,
			"Volcano queue name must not be empty")}
	}
	return nil
}

// EnforcePodGroupPolicy annotates every pod template with the PodGroup's name.
func (*Volcano) EnforcePodGroupPolicy(info *runtime.Info, req *runtime.Request) error {
	if policy(info) == nil {
		return nil
	}
	for k := range info.Spec.ReplicatedJobs {
		tmpl := &info.Spec.ReplicatedJobs[k].Template.Spec.Template
		if tmpl.Annotations == nil {
			tmpl.Annotations = map[string]string{}
		}
		tmpl.Annotations[GroupNameAnnotation] = req.Name
	}
	return nil
}

// queue is the PodGroup's queue: the JobSet annotation.
func queue(info *runtime.Info) string { return info.Annotations[QueueAnnotation] }

// Build emits the PodGroup: every pod of the job and their summed requests,
// the queue, the priority class (each as the request's gang policy says,
// when it does) and the network-topology constraint. It is applied while the
// job is suspended and left alone once it runs.
func (*Volcano) Build(info *runtime.Info, req *runtime.Request) ([]plan.Child, error) {
	p := policy(info)
	if p == nil {
		return nil, nil
	}
	spec := req.Gang.Apply(info.Gang()).PodGroupSpec()
	if q := queue(info); q != "" {
		spec["queue"] = q
	}
	if pc := info.PriorityClassName(); pc != "" {
		spec["priorityClassName"] = pc
	}
	if g := req.Gang; g != nil {
		if g.Queue != "" {
			spec["queue"] = g.Queue
		}
		if g.PriorityClass != "" {
			spec["priorityClassName"] = g.PriorityClass
		}
	}
	if nt := p.NetworkTopology; nt != nil {
		topo := map[string]any{}
		if nt.Mode != "" {
			topo["mode"] = nt.Mode
		}
		if nt.HighestTierAllowed != nil {
			topo["highestTierAllowed"] = int64(*nt.HighestTierAllowed)
		}
		spec["networkTopology"] = topo
	}
	pg := NewPodGroup()
	pg.SetName(req.Name)
	pg.SetNamespace(req.Namespace)
	if err := unstructured.SetNestedField(pg.Object, spec, "spec"); err != nil {
		return nil, fmt.Errorf("rendering PodGroup %s: %w", req.Name, err)
	}
	return []plan.Child{plan.ApplyWhileSuspended(pg)}, nil
}

// Status implements framework.StatusPlugin: why the job's pods wait (the
// first gang plugin to say so wins, see gangWaiting).
func (*Volcano) Status(name string, obs *observe.Observed, facts *framework.Facts) {
	if facts.Gang != nil {
		return
	}
	if reason, msg, ok := gangWaiting(name, obs); ok {
		facts.Gang = &framework.Waiting{Reason: reason, Message: msg}
	}
}

// gangWaiting says why the job's pods wait, while Volcano has not placed its
// PodGroup: the scheduler's Unschedulable condition on the group (reason and
// message verbatim), else the group's phase and queue.
func gangWaiting(name string, obs *observe.Observed) (string, string, bool) {
	if obs == nil {
		return "", "", false
	}
	pg, ok := obs.Children[childsync.Key{GroupKind: PodGroupGVK.GroupKind(), Name: name}].(*unstructured.Unstructured)
	if !ok {
		return "", "", false
	}
	phase, _, _ := unstructured.NestedString(pg.Object, "status", "phase")
	if phase == "Running" || phase == "Completed" {
		return "", "", false
	}
	conds, _, _ := unstructured.NestedSlice(pg.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Unschedulable" || m["status"] != "True" {
			continue
		}
		reason, _ := m["reason"].(string)
		if reason == "" {
			reason = "Unschedulable"
		}
		message, _ := m["message"].(string)
		return reason, fmt.Sprintf("PodGroup %s: %s", pg.GetName(), message), true
	}
	if phase == "" {
		phase = "Pending"
	}
	queue, _, _ := unstructured.NestedString(pg.Object, "spec", "queue")
	msg := fmt.Sprintf("PodGroup %s is %s", pg.GetName(), phase)
	if queue != "" {
		msg += " in queue " + queue
	}
	if m := observe.UnschedulableMessage(obs.Pods); m != "" {
		msg += "; " + m
	}
	return "PodGroup" + phase, msg, true
}
