package controller

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	trruntime "github.com/trainyard/trainyard/pkg/runtime"
)

// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=workloads,verbs=get;list;watch

// jobUIDLabel is set by Kueue on each Workload: the UID of the job it stands for
// (the TrainJob with Kueue's TrainJob integration, the JobSet without).
const jobUIDLabel = "kueue.x-k8s.io/job-uid"

// Reasons a queued TrainJob is not running, from its Kueue Workload.
const (
	ReasonWaitingForQuota      = "WaitingForQuota"
	ReasonAdmitted             = "Admitted"
	ReasonExceedsQueueCapacity = "ExceedsQueueCapacity"
	ReasonInadmissible         = "Inadmissible"
	ReasonPreempted            = "Preempted"
	ReasonEvicted              = "Evicted"
	ReasonDeactivated          = "Deactivated"
	ReasonAdmissionChecks      = "WaitingForAdmissionChecks"
)

// queueState says, from Kueue's Workload for the TrainJob or its JobSet, why a
// queued job is not running. queued is false when there is no Workload, or it is
// admitted (then the pods say the rest).
func (r *TrainJobReconciler) queueState(ctx context.Context, job *trainer.TrainJob, js *jobsetv1alpha2.JobSet) (reason, message string, queued bool, err error) {
	if !r.Kueue {
		return "", "", false, nil
	}
	uids := []string{string(job.UID)}
	if js != nil {
		uids = append(uids, string(js.UID))
	}
	var items []kueue.Workload
	for _, uid := range uids {
		var list kueue.WorkloadList
		if err := r.List(ctx, &list, client.InNamespace(job.Namespace), client.MatchingFields{workloadJobIndex: uid}); err != nil {
			return "", "", false, fmt.Errorf("listing Kueue workloads: %w", err)
		}
		items = append(items, list.Items...)
	}
	var wl *kueue.Workload
	for i := range items {
		w := &items[i]
		if w.DeletionTimestamp != nil || meta.IsStatusConditionTrue(w.Status.Conditions, kueue.WorkloadFinished) {
			continue
		}
		if wl == nil || w.CreationTimestamp.After(wl.CreationTimestamp.Time) {
			wl = w
		}
	}
	if wl == nil {
		return "", "", false, nil
	}
	queue := fmt.Sprintf("LocalQueue %s", wl.Spec.QueueName)
	if meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted) {
		// Admitted, but Kueue has not resumed the job yet (a busy Kueue can take
		// a while): it is about to start, not suspended.
		if trruntime.Suspended(job) || (js != nil && ptr.Deref(js.Spec.Suspend, false)) {
			return ReasonAdmitted, fmt.Sprintf("admitted in %s; waiting for Kueue to start it", queue), true, nil
		}
		return "", "", false, nil
	}
	if !ptr.Deref(wl.Spec.Active, true) {
		return ReasonDeactivated, fmt.Sprintf("Kueue workload %s is deactivated", wl.Name), true, nil
	}
	if c := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted); c != nil && c.Status == "True" {
		if c.Reason == kueue.WorkloadEvictedByPreemption {
			return ReasonPreempted, fmt.Sprintf("preempted in %s: %s", queue, c.Message), true, nil
		}
		return ReasonEvicted, fmt.Sprintf("evicted from %s (%s): %s", queue, c.Reason, c.Message), true, nil
	}
	qr := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
	switch {
	case qr == nil:
		return ReasonWaitingForQuota, fmt.Sprintf("queued in %s", queue), true, nil
	case qr.Status == "True":
		return ReasonAdmissionChecks, fmt.Sprintf("quota reserved in %s; waiting for admission checks", queue), true, nil
	case qr.Reason == kueue.WorkloadInadmissible:
		return ReasonInadmissible, qr.Message, true, nil
	case strings.Contains(qr.Message, "> maximum capacity"):
		// Kueue keeps such a workload pending, but it cannot fit until the
		// ClusterQueue's quota grows: say so instead of letting it look queued.
		return ReasonExceedsQueueCapacity, fmt.Sprintf("can never fit %s as its quota stands: %s", queue, qr.Message), true, nil
	}
	return ReasonWaitingForQuota, fmt.Sprintf("waiting in %s: %s", queue, qr.Message), true, nil
}

// workloadToTrainJob maps a Workload to its TrainJob: the owner is the TrainJob
// itself, or its JobSet, which is named after it.
func workloadToTrainJob(_ context.Context, o client.Object) []reconcile.Request {
	for _, ref := range o.GetOwnerReferences() {
		if (ref.Kind == trainer.TrainJobKind && strings.HasPrefix(ref.APIVersion, trainer.GroupVersion.Group+"/")) ||
			(ref.Kind == "JobSet" && strings.HasPrefix(ref.APIVersion, jobsetv1alpha2.GroupVersion.Group+"/")) {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: ref.Name}}}
		}
	}
	return nil
}
