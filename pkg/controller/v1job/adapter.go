package v1job

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
	"github.com/trainyard/trainyard/pkg/observe"
	"github.com/trainyard/trainyard/pkg/plan"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
	"github.com/trainyard/trainyard/pkg/runtime/plugins"
)

// pipeline is a kind's pipeline: its own plugins, the per-replica Services
// when v1 made them, then the plugins of every kind that brings complete pod
// templates (gang PodGroups, the JobSet).
func (d *Def) pipeline() []framework.Plugin {
	var out []framework.Plugin
	if d.OwnPlugins != nil {
		out = append(out, d.OwnPlugins()...)
	}
	if d.Services {
		out = append(out, &ServicesPlugin{def: d})
	}
	return append(out, plugins.ForPodTemplates()...)
}

// NewFramework returns the kind's pipeline, built once by its controller.
func (d *Def) NewFramework() (*framework.Framework, error) { return framework.New(d.pipeline()...) }

// Owned lists the child kinds a job's plan has.
func (d *Def) Owned() []client.Object {
	fw, err := d.NewFramework()
	if err != nil {
		return nil
	}
	return fw.Owns()
}

// Build runs the pipeline fw for a defaulted, valid job and returns its plan.
func (d *Def) Build(fw *framework.Framework, job Job, clusterDomain string) (*plan.Plan, error) {
	rt, err := d.ToRuntime(job, clusterDomain)
	if err != nil {
		return nil, fmt.Errorf("converting %s %s: %w", d.Kind, job.GetName(), err)
	}
	p, err := fw.Build(d.ToRequest(job), rt)
	if err != nil {
		return nil, err
	}
	if p.JobSet() == nil {
		return nil, fmt.Errorf("pipeline returned no JobSet")
	}
	return p, nil
}

// Adapter is a kubeflow.org/v1 kind on the generic reconciler.
type Adapter struct {
	Def *Def
	// Framework is the kind's pipeline (Def.NewFramework), built once.
	Framework *framework.Framework
	// ClusterDomain is the cluster's DNS domain.
	ClusterDomain string
	// Metrics are the kind's metrics (nil: none recorded).
	Metrics *Metrics
}

var (
	_ jobframework.Adapter   = Adapter{}
	_ jobframework.Lifecycle = Adapter{}
	_ jobframework.Recorder  = Adapter{}
)

// Kind implements jobframework.Adapter.
func (a Adapter) Kind() string { return a.Def.Kind }

// New implements jobframework.Adapter.
func (a Adapter) New() client.Object { return a.Def.New() }

// Ours implements jobframework.Adapter: a job another controller manages
// (MultiKueue) is left alone.
func (Adapter) Ours(o client.Object) bool {
	m := o.(Job).JobRunPolicy().ManagedBy
	return m == nil || *m == kubeflowv1.KubeflowJobsController
}

// passTime is the time of a pass: v1 timestamps travel with second
// precision; truncating keeps a status that round-tripped through the API
// server equal to a recomputed one.
func passTime(now time.Time) metav1.Time { return metav1.NewTime(now.Truncate(time.Second)) }

// Plan implements jobframework.Adapter: nothing for a job that fails
// validation (a *framework.InvalidError, which Status reports); else the
// plan of the defaulted job.
func (a Adapter) Plan(o client.Object, _ *observe.Observed, _ time.Time) (*plan.Plan, error) {
	job := o.(Job)
	if errs := a.Def.Validate(nil, job); len(errs) > 0 {
		return nil, &framework.InvalidError{Errs: errs}
	}
	return a.Def.Build(a.Framework, a.Def.Defaulted(job), a.ClusterDomain)
}

// Finished implements jobframework.Lifecycle.
func (Adapter) Finished(o client.Object) (bool, *metav1.Time) {
	st := o.(Job).JobStatus()
	return IsFinished(st), st.CompletionTime
}

// TTLAfterFinished implements jobframework.Lifecycle.
func (Adapter) TTLAfterFinished(o client.Object) *int32 {
	return o.(Job).JobRunPolicy().TTLSecondsAfterFinished
}

// Deadline implements jobframework.Lifecycle: activeDeadlineSeconds from
// status.startTime, as v1 counts it; none while suspended, nor for a job that
// fails validation (it fails for that).
func (a Adapter) Deadline(o client.Object, now time.Time) (time.Time, bool) {
	job := o.(Job)
	if errs := a.Def.Validate(nil, job); len(errs) > 0 {
		return time.Time{}, false
	}
	rp := job.JobRunPolicy()
	if ptr.Deref(rp.Suspend, false) || rp.ActiveDeadlineSeconds == nil {
		return time.Time{}, false
	}
	st := job.JobStatus().DeepCopy()
	startRun(st, false, passTime(now))
	return st.StartTime.Add(time.Duration(*rp.ActiveDeadlineSeconds) * time.Second), true
}

// startRun sets startTime the way v1 did: a resumed job counts its deadline
// from now; one that never ran from its first unsuspended pass. It reports
// whether the job was resumed in this pass.
func startRun(status *kubeflowv1.JobStatus, suspended bool, now metav1.Time) (resumed bool) {
	if suspended {
		return false
	}
	if IsTrue(status, kubeflowv1.JobSuspended) {
		resumed = true
		status.StartTime = now.DeepCopy()
	}
	if status.StartTime == nil {
		status.StartTime = now.DeepCopy()
	}
	return resumed
}

// RecordSync implements jobframework.Recorder: nothing of syncing is counted.
func (Adapter) RecordSync(client.Object, jobframework.Sync, time.Time) {}

// RecordStatus implements jobframework.Recorder: the conditions that turned True.
func (a Adapter) RecordStatus(old, updated client.Object, _ time.Time) {
	u, ok := updated.(Job)
	if !ok || u == nil || a.Metrics == nil {
		return
	}
	prev := old.(Job).JobStatus()
	for _, c := range u.JobStatus().Conditions {
		if c.Status == "True" && !IsTrue(prev, c.Type) {
			a.Metrics.ConditionTrue(string(c.Type))
		}
	}
}
