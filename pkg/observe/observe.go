// Package observe holds what the reconciler saw of one job's world in one
// pass: its children, the pods they run, the queue's Workloads, and what the
// job's kind reads besides (a TrainJob's runtime). It is read once per pass,
// before anything is written, and then only passed around: the plan and the
// status are computed from it without a client.
package observe

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/trainyard/trainyard/pkg/childsync"
)

// JobSetKind is the group and kind of a JobSet.
var JobSetKind = schema.GroupKind{Group: jobsetv1alpha2.GroupVersion.Group, Kind: "JobSet"}

// Observed is one pass's view of a job's children.
type Observed struct {
	// Children are the objects the job controls, by kind and name.
	Children childsync.Children
	// Pods are the job's live and finished pods, sorted by name.
	Pods []corev1.Pod
	// Workloads are Kueue's Workloads for the job or its JobSet (empty when
	// Kueue is not installed).
	Workloads []kueue.Workload
	// KueueServed is whether the cluster serves Kueue's Workload API.
	KueueServed bool
	// Taken are objects under the name of a child the job plans that the
	// job does not control, observed because an earlier pass's create of
	// that name was refused (AlreadyExists): syncing reports them as not
	// owned and never touches them.
	Taken childsync.Children
	// Inputs are what the job's kind read for its plan besides the job and
	// its children (jobframework.InputReader), in the kind's own type: a
	// TrainJob's runtime and the objects its checks look up.
	Inputs any
}

// JobSet returns the owned JobSet of this name, or nil.
func (o *Observed) JobSet(name string) *jobsetv1alpha2.JobSet {
	if o == nil {
		return nil
	}
	if js, ok := o.Children[childsync.Key{GroupKind: JobSetKind, Name: name}].(*jobsetv1alpha2.JobSet); ok {
		return js
	}
	return nil
}

// PodsOf returns the pods of a JobSet (by UID), deleted ones included,
// optionally only those of one replicated job ("" for all).
func (o *Observed) PodsOf(js *jobsetv1alpha2.JobSet, rjob string) []corev1.Pod {
	if o == nil || js == nil {
		return nil
	}
	var out []corev1.Pod
	for _, p := range o.Pods {
		if p.Labels[jobsetv1alpha2.JobSetUIDKey] == string(js.UID) &&
			(rjob == "" || p.Labels[jobsetv1alpha2.ReplicatedJobNameKey] == rjob) {
			out = append(out, p)
		}
	}
	return out
}

// UnschedulableMessage is "pod <name>: <message>" for the first pod whose
// PodScheduled condition is False, or "".
func UnschedulableMessage(pods []corev1.Pod) string {
	for _, p := range pods {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message != "" {
				return fmt.Sprintf("pod %s: %s", p.Name, c.Message)
			}
		}
	}
	return ""
}
