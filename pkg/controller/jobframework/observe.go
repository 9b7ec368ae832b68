package jobframework

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/trainyard/trainyard/pkg/childsync"
	"github.com/trainyard/trainyard/pkg/observe"
)

// Cache indexes, so that a pass looks up a job's children, pods and Workloads
// directly instead of scanning the namespace.
const (
	// ownerIndex indexes children by the UID of their controller.
	ownerIndex = "metadata.ownerReferences.controller"
	// podJobSetIndex indexes pods by their JobSet's name (the job's name).
	podJobSetIndex = "metadata.labels.jobset-name"
	// workloadJobIndex indexes Kueue Workloads by the UID of the job they
	// stand for (the job itself, or its JobSet).
	workloadJobIndex = "metadata.labels.job-uid"
)

// jobUIDLabel is set by Kueue on each Workload: the UID of the job it stands for.
const jobUIDLabel = "kueue.x-k8s.io/job-uid"

func controllerUID(o client.Object) []string {
	if ref := metav1.GetControllerOf(o); ref != nil {
		return []string{string(ref.UID)}
	}
	return nil
}

// observe reads, from the cache, everything a pass looks at: the job's
// children of every served kind, the pods of its JobSet, Kueue's Workloads
// for it, and what its kind reads besides (InputReader). Nothing is read
// after it.
func (r *Reconciler) observe(ctx context.Context, job client.Object) (*observe.Observed, error) {
	obs, err := r.observeChildren(ctx, job)
	if err != nil {
		return nil, err
	}
	if obs.Taken, err = r.observeTaken(ctx, job, obs); err != nil {
		return nil, err
	}
	if in, ok := r.adapter.(InputReader); ok {
		if err := in.ReadInputs(ctx, r.client, job, obs); err != nil {
			return nil, fmt.Errorf("reading the inputs of %s %s: %w", r.adapter.Kind(), job.GetName(), err)
		}
	}
	return obs, nil
}

// observeChildren reads the job's children, pods and Workloads.
func (r *Reconciler) observeChildren(ctx context.Context, job client.Object) (*observe.Observed, error) {
	obs := &observe.Observed{Children: childsync.Children{}, KueueServed: r.kueue}
	for _, kind := range r.kinds {
		list, err := r.newList(kind)
		if err != nil {
			return nil, err
		}
		if err := r.client.List(ctx, list, client.InNamespace(job.GetNamespace()), client.MatchingFields{ownerIndex: string(job.GetUID())}); err != nil {
			return nil, fmt.Errorf("listing children of %s %s: %w", r.adapter.Kind(), job.GetName(), err)
		}
		items, err := meta(list)
		if err != nil {
			return nil, err
		}
		for _, o := range items {
			key, err := r.syncer.KeyOf(o)
			if err != nil {
				return nil, err
			}
			obs.Children[key] = o
		}
	}
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, client.InNamespace(job.GetNamespace()), client.MatchingFields{podJobSetIndex: job.GetName()}); err != nil {
		return nil, fmt.Errorf("listing pods of %s %s: %w", r.adapter.Kind(), job.GetName(), err)
	}
	obs.Pods = pods.Items
	sort.Slice(obs.Pods, func(i, j int) bool { return obs.Pods[i].Name < obs.Pods[j].Name })
	if !r.kueue {
		return obs, nil
	}
	uids := []string{string(job.GetUID())}
	if js := obs.JobSet(job.GetName()); js != nil {
		uids = append(uids, string(js.UID))
	}
	for _, uid := range uids {
		var list kueue.WorkloadList
		if err := r.client.List(ctx, &list, client.InNamespace(job.GetNamespace()), client.MatchingFields{workloadJobIndex: uid}); err != nil {
			return nil, fmt.Errorf("listing Kueue workloads: %w", err)
		}
		obs.Workloads = append(obs.Workloads, list.Items...)
	}
	return obs, nil
}

// jobSetName returns the label pods carry with their JobSet's name.
func jobSetName(o client.Object) []string {
	if v := o.GetLabels()[jobsetv1alpha2.JobSetNameKey]; v != "" {
		return []string{v}
	}
	return nil
}

func workloadJobUID(o client.Object) []string {
	if v := o.GetLabels()[jobUIDLabel]; v != "" {
		return []string{v}
	}
	return nil
}
