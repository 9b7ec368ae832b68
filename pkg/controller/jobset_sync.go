package controller

import (
	"context"
	"fmt"

	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/jobsetsync"
	trruntime "github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
	"github.com/trainyard/trainyard/pkg/validation"
)

// errJobSetNotOwned: a JobSet with the TrainJob's name belongs to someone else.
var errJobSetNotOwned = jobsetsync.ErrNotOwned

// syncJobSet makes the JobSet match the TrainJob (see package jobsetsync for the
// rules). A new JobSet is rendered from the live runtime and carries its
// snapshot; an existing one is always re-rendered from that snapshot, so later
// edits of the runtime never change the job.
func (r *TrainJobReconciler) syncJobSet(ctx context.Context, job *trainer.TrainJob, js *jobsetv1alpha2.JobSet) (*jobsetv1alpha2.JobSet, jobsetsync.Action, error) {
	syncer := jobsetsync.Syncer{Client: r.Client, FieldOwner: FieldOwner}
	return syncer.Sync(ctx, job, trruntime.Suspended(job), js, func(existing *jobsetv1alpha2.JobSet) (*jobsetv1alpha2.JobSet, error) {
		rt, err := r.runtimeFor(ctx, job, existing)
		if err != nil {
			return nil, err
		}
		return r.render(job, rt)
	})
}

// runtimeFor is the snapshot on an existing JobSet, else the live runtime (also
// for a JobSet without a readable snapshot: made by hand, or by an older version).
func (r *TrainJobReconciler) runtimeFor(ctx context.Context, job *trainer.TrainJob, existing *jobsetv1alpha2.JobSet) (*trruntime.Runtime, error) {
	if existing != nil {
		if s, ok := existing.Annotations[SnapshotAnnotation]; ok {
			if rt, err := trruntime.DecodeRuntime(s); err == nil {
				return rt, nil
			}
		}
	}
	return resolveRuntime(ctx, r.Client, job)
}

// render runs the pipeline and returns the JobSet to write, annotated with the
// runtime snapshot.
func (r *TrainJobReconciler) render(job *trainer.TrainJob, rt *trruntime.Runtime) (*jobsetv1alpha2.JobSet, error) {
	// The admission webhook runs these checks too; running them here reports bad
	// input in status when the webhook is not installed.
	if errs := append(validation.ValidateTrainJob(nil, job), validation.ValidatePodNames(job, rt)...); len(errs) > 0 {
		return nil, &framework.InvalidError{Errs: errs}
	}
	objs, err := r.Framework.Build(job, rt)
	if err != nil {
		return nil, err
	}
	var js *jobsetv1alpha2.JobSet
	for _, o := range objs {
		if j, ok := o.(*jobsetv1alpha2.JobSet); ok {
			js = j
		}
	}
	if js == nil || len(objs) != 1 {
		return nil, fmt.Errorf("pipeline returned %d objects; this version of Trainyard writes exactly one JobSet", len(objs))
	}
	snap, err := rt.Encode()
	if err != nil {
		return nil, err
	}
	if js.Annotations == nil {
		js.Annotations = map[string]string{}
	}
	js.Annotations[SnapshotAnnotation] = snap
	return js, nil
}
