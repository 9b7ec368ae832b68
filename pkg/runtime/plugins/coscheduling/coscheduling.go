// Package coscheduling gang-schedules a TrainJob with the Coscheduling plugin
// of the Kubernetes scheduler-plugins (sigs.k8s.io/scheduler-plugins): a
// scheduling.x-k8s.io/v1alpha1 PodGroup per TrainJob asks that all its pods
// (initializers and launcher included) be bound together or not at all, and a
// label ties every pod to the group. The runtime chooses the scheduler (its
// pods' schedulerName); this plugin never sets it.
//
// The PodGroup is built as an unstructured object: the scheduler-plugins API
// module would bring its scheduler's dependency tree into Trainyard's go.mod
// for four fields.
package coscheduling

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/childsync"
	"github.com/trainyard/trainyard/pkg/observe"
	"github.com/trainyard/trainyard/pkg/plan"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
)

// +kubebuilder:rbac:groups=scheduling.x-k8s.io,resources=podgroups,verbs=get;list;watch;create;patch

// Name of the plugin.
const Name = "CoScheduling"

// PodGroupLabel ties a pod to its PodGroup (value: the group's name, the
// TrainJob's name).
const PodGroupLabel = "scheduling.x-k8s.io/pod-group"

// DefaultScheduleTimeoutSeconds is the CRD's default, used when the runtime
// does not say.
const DefaultScheduleTimeoutSeconds int32 = 60

// PodGroupGVK is the kind of the PodGroup.
var PodGroupGVK = schema.GroupVersionKind{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Kind: "PodGroup"}

// Coscheduling is the plugin.
type Coscheduling struct{}

var (
	_ framework.PodGroupPolicyPlugin = (*Coscheduling)(nil)
	_ framework.BuildPlugin          = (*Coscheduling)(nil)
	_ framework.OwnerPlugin          = (*Coscheduling)(nil)
	_ framework.StatusPlugin         = (*Coscheduling)(nil)
)

// New returns the plugin.
func New() *Coscheduling { return &Coscheduling{} }

// Name implements framework.Plugin.
func (*Coscheduling) Name() string { return Name }

// Owns implements framework.OwnerPlugin.
func (*Coscheduling) Owns() []client.Object { return []client.Object{NewPodGroup()} }

// NewPodGroup returns an empty PodGroup (its kind set).
func NewPodGroup() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(PodGroupGVK)
	return u
}

func policy(info *runtime.Info) *trainer.CoschedulingPodGroupPolicySource {
	if p := info.Runtime.Spec.PodGroupPolicy; p != nil {
		return p.Coscheduling
	}
	return nil
}

// EnforcePodGroupPolicy labels every pod template with the PodGroup's name.
func (*Coscheduling) EnforcePodGroupPolicy(info *runtime.Info, req *runtime.Request) error {
	if policy(info) == nil {
		return nil
	}
	for k := range info.Spec.ReplicatedJobs {
		tmpl := &info.Spec.ReplicatedJobs[k].Template.Spec.Template
		if tmpl.Labels == nil {
			tmpl.Labels = map[string]string{}
		}
		tmpl.Labels[PodGroupLabel] = req.Name
	}
	return nil
}

// Build emits the PodGroup: every pod of the job, their summed requests
// (unless the request's gang policy says otherwise) and the runtime's
// schedule timeout. It is applied while the job is suspended and left alone
// once it runs.
func (*Coscheduling) Build(info *runtime.Info, req *runtime.Request) ([]plan.Child, error) {
	p := policy(info)
	if p == nil {
		return nil, nil
	}
	spec := req.Gang.Apply(info.Gang()).PodGroupSpec()
	spec["scheduleTimeoutSeconds"] = int64(ptr.Deref(p.ScheduleTimeoutSeconds, DefaultScheduleTimeoutSeconds))
	pg := NewPodGroup()
	pg.SetName(req.Name)
	pg.SetNamespace(req.Namespace)
	if err := unstructured.SetNestedField(pg.Object, spec, "spec"); err != nil {
		return nil, fmt.Errorf("rendering PodGroup %s: %w", req.Name, err)
	}
	return []plan.Child{plan.ApplyWhileSuspended(pg)}, nil
}

// Phases of a PodGroup in which its pods are placed (or done): the pods then
// speak for themselves.
var placedPhases = map[string]bool{"Scheduled": true, "Running": true, "Succeeded": true, "Finished": true, "Failed": true}

// Status implements framework.StatusPlugin: why the job's pods wait (the
// first gang plugin to say so wins, see gangWaiting).
func (*Coscheduling) Status(name string, obs *observe.Observed, facts *framework.Facts) {
	if facts.Gang != nil {
		return
	}
	if reason, msg, ok := gangWaiting(name, obs); ok {
		facts.Gang = &framework.Waiting{Reason: reason, Message: msg}
	}
}

// gangWaiting says why the job's pods wait, while its PodGroup is not
// scheduled yet: the group's phase and count, and the scheduler's reason on
// the first pod it left unscheduled (the coscheduling plugin writes why the
// gang does not fit there, e.g. a permit timeout).
//
// The count is the larger of the group's status.scheduled and the job's pods
// bound to a node: scheduler-plugins' PodGroup controller (v0.34) never
// writes status.scheduled nor the Scheduled phase, and keeps a placed group in
// Scheduling until its pods run. Once minMember pods are bound the gang no
// longer waits.
func gangWaiting(name string, obs *observe.Observed) (string, string, bool) {
	if obs == nil {
		return "", "", false
	}
	pg, ok := obs.Children[childsync.Key{GroupKind: PodGroupGVK.GroupKind(), Name: name}].(*unstructured.Unstructured)
	if !ok {
		return "", "", false
	}
	phase, _, _ := unstructured.NestedString(pg.Object, "status", "phase")
	if placedPhases[phase] {
		return "", "", false
	}
	if phase == "" {
		phase = "Pending"
	}
	minMember, _, _ := unstructured.NestedInt64(pg.Object, "spec", "minMember")
	scheduled, _, _ := unstructured.NestedInt64(pg.Object, "status", "scheduled")
	scheduled = max(scheduled, boundPods(obs.Pods))
	if minMember > 0 && scheduled >= minMember {
		return "", "", false
	}
	msg := fmt.Sprintf("PodGroup %s is %s: %d/%d pods scheduled", pg.GetName(), phase, scheduled, minMember)
	if m := observe.UnschedulableMessage(whyUnschedulable(obs.Pods)); m != "" {
		msg += "; " + m
	}
	return "PodGroup" + phase, msg, true
}

// siblingRejections are what the Coscheduling plugin writes on the pods it
// had placed and released because another pod of their gang did not fit
// (scheduler-plugins v0.34: PostFilter and Unreserve). They say that the gang
// failed, not why.
var siblingRejections = []string{"optimistic rejection in PostFilter", "rejection in Unreserve"}

// SiblingRejection says whether a pod's scheduling message is only that the
// Coscheduling plugin released it with its gang (siblingRejections).
func SiblingRejection(message string) bool {
	for _, r := range siblingRejections {
		if strings.Contains(message, r) {
			return true
		}
	}
	return false
}

// whyUnschedulable orders the pods so that those whose scheduler message says
// why the gang does not fit (e.g. "Insufficient cpu", a permit timeout) come
// before the siblings released because of them.
func whyUnschedulable(pods []corev1.Pod) []corev1.Pod {
	var why, released []corev1.Pod
	for _, p := range pods {
		sibling := false
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				sibling = sibling || SiblingRejection(c.Message)
			}
		}
		if sibling {
			released = append(released, p)
		} else {
			why = append(why, p)
		}
	}
	return append(why, released...)
}

// boundPods counts the pods the scheduler has bound to a node.
func boundPods(pods []corev1.Pod) int64 {
	var n int64
	for k := range pods {
		if pods[k].Spec.NodeName != "" {
			n++
		}
	}
	return n
}
