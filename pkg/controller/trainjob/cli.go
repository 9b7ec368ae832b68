package trainjob

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/cli/logs"
	"github.com/trainyard/trainyard/pkg/cli/view"
	"github.com/trainyard/trainyard/pkg/runtime"
)

// The pod label and the replicated jobs the steps are derived from.
const (
	ReplicatedJobLabel = "jobset.sigs.k8s.io/replicatedjob-name"
	LauncherJob        = "launcher"
	NodeJob            = "node"
)

// What the trainyard CLI shows of a TrainJob: the Kubeflow SDK's view of it,
// with its steps (view.go says what get, logs and wait do with it).

// Job is what the CLI shows of a TrainJob: the SDK's TrainJob (name, runtime,
// steps, status, number of nodes) plus the reason and message of its status.
type Job struct {
	Name              string      `json:"name"`
	Namespace         string      `json:"namespace"`
	Runtime           string      `json:"runtime"`
	CreationTimestamp metav1.Time `json:"creationTimestamp"`
	NumNodes          int32       `json:"numNodes"`
	// Status is status.phase (Pending, Running, Suspended, Complete, Failed); for a
	// TrainJob without a phase (another controller), what the SDK derives.
	Status  string      `json:"status"`
	Reason  string      `json:"reason,omitempty"`
	Message string      `json:"message,omitempty"`
	Steps   []view.Step `json:"steps"`
	// TrainerStatus is the progress the training code reported (status.trainerStatus).
	TrainerStatus *trainer.TrainerStatus `json:"trainerStatus,omitempty"`
}

// Finished reports whether the TrainJob is Complete or Failed, and which.
func Finished(job *trainer.TrainJob) (cond *metav1.Condition, done bool) {
	for _, t := range []string{trainer.TrainJobComplete, trainer.TrainJobFailed} {
		if c := apimeta.FindStatusCondition(job.Status.Conditions, t); c != nil && c.Status == metav1.ConditionTrue {
			return c, true
		}
	}
	return nil, false
}

// NewJob describes a TrainJob from the object, its pods and, when known, its
// runtime's node count (for the number of nodes when the TrainJob does not
// set it).
func NewJob(job *trainer.TrainJob, pods []corev1.Pod, runtimeNodes *int32) Job {
	return describeJob(job, pods, nil, runtimeNodes)
}

func describeJob(job *trainer.TrainJob, pods []corev1.Pod, initializers map[string]string, runtimeNodes *int32) Job {
	j := Job{Name: job.Name, Namespace: job.Namespace, Runtime: job.Spec.RuntimeRef.Name,
		CreationTimestamp: job.CreationTimestamp, Steps: StepsOf(pods, initializers),
		Status: string(job.Status.Phase), Reason: job.Status.Reason, Message: job.Status.Message,
		TrainerStatus: job.Status.TrainerStatus}
	switch {
	case job.Spec.Trainer != nil && job.Spec.Trainer.NumNodes != nil:
		j.NumNodes = *job.Spec.Trainer.NumNodes
	case job.Status.NumNodes != nil:
		j.NumNodes = *job.Status.NumNodes
	case runtimeNodes != nil:
		j.NumNodes = *runtimeNodes
	}
	if j.Status == "" {
		j.Status, j.Reason, j.Message = sdkStatus(job, j.Steps, j.NumNodes)
	}
	return j
}

// sdkStatus is the SDK's status of a TrainJob: Complete or Failed from the
// conditions, else Running when every node's pod runs (or ran), else Created.
func sdkStatus(job *trainer.TrainJob, steps []view.Step, numNodes int32) (status, reason, message string) {
	if c, done := Finished(job); done {
		return c.Type, c.Reason, c.Message
	}
	if len(job.Status.Conditions) > 0 {
		return trainer.TrainJobCreated, "", ""
	}
	running := int32(0)
	for _, s := range steps {
		if len(s.Name) > 5 && s.Name[:5] == "node-" && (s.Status == string(corev1.PodRunning) || s.Status == string(corev1.PodSucceeded)) {
			running++
		}
	}
	if numNodes > 0 && running == numNodes {
		return string(trainer.TrainJobRunning), "", ""
	}
	return trainer.TrainJobCreated, "", ""
}

// Steps turns a TrainJob's pods into steps as the SDK does, ordered by name (node
// ranks numerically), then pod creation. Node pods are node-<completion index>;
// when the job has a launcher, it is node-0 and the nodes count from 1. The device
// comes from the step container's limits; a numeric PET_NPROC_PER_NODE of the
// container is its device count (torchrun's processes per node). Pods of the
// replicated jobs named dataset-initializer and model-initializer are steps of
// those names.
func Steps(pods []corev1.Pod) []view.Step { return StepsOf(pods, nil) }

// InitializerSteps maps the replicated jobs of a JobSet that are labelled
// trainer.kubeflow.org/trainjob-ancestor-step=dataset-initializer or
// model-initializer to that step name, whatever the jobs are named.
func InitializerSteps(js *jobsetv1alpha2.JobSet) map[string]string {
	m := map[string]string{}
	if js == nil {
		return m
	}
	for _, rj := range js.Spec.ReplicatedJobs {
		switch a := rj.Template.Labels[trainer.AncestorLabel]; a {
		case trainer.AncestorDatasetInitializer, trainer.AncestorModelInitializer:
			m[rj.Name] = a
		}
	}
	return m
}

// StepOf is the initializer step a pod belongs to (dataset-initializer or
// model-initializer), given InitializerSteps of its JobSet, or "": its
// replicated job is named as the step, is labelled so in the JobSet, or the pod
// itself carries the ancestor label.
func StepOf(p *corev1.Pod, initializers map[string]string) string {
	rj := p.Labels[ReplicatedJobLabel]
	if s, ok := initializers[rj]; ok {
		return s
	}
	for _, s := range []string{rj, p.Labels[trainer.AncestorLabel]} {
		if s == trainer.AncestorDatasetInitializer || s == trainer.AncestorModelInitializer {
			return s
		}
	}
	return ""
}

// StepsOf is Steps with the initializer steps of the JobSet (InitializerSteps).
func StepsOf(pods []corev1.Pod, initializers map[string]string) []view.Step {
	launcher := false
	for _, p := range pods {
		if p.Labels[ReplicatedJobLabel] == LauncherJob {
			launcher = true
		}
	}
	type row struct {
		view.Step
		rank    int
		created metav1.Time
	}
	var rows []row
	for i := range pods {
		p := &pods[i]
		rj := p.Labels[ReplicatedJobLabel]
		container, name, rank := NodeJob, "", -1
		if step := StepOf(p, initializers); step != "" {
			rj = step
		}
		switch rj {
		case trainer.AncestorDatasetInitializer, trainer.AncestorModelInitializer:
			container, name = rj, rj
		case LauncherJob, NodeJob:
			r, ok := logs.Rank(p)
			if !ok {
				continue
			}
			if launcher && rj == NodeJob {
				r++
			}
			if rj == LauncherJob {
				container = LauncherJob
			}
			name, rank = "node-"+strconv.Itoa(r), r
		default:
			continue
		}
		rows = append(rows, row{Step: view.StepOfPod(p, name, container), rank: rank, created: p.CreationTimestamp})
	}
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if (a.rank < 0) != (b.rank < 0) {
			return a.rank < 0 // initializers first
		}
		if a.rank != b.rank {
			return a.rank < b.rank
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.created.Before(&b.created)
	})
	steps := make([]view.Step, 0, len(rows))
	for _, r := range rows {
		steps = append(steps, r.Step)
	}
	return steps
}

// jobPodSelector selects the pods of the named JobSets (all JobSets when no
// name is given); Steps picks the steps among them.
func jobPodSelector(names ...string) (labels.Selector, error) {
	op, vals := selection.Exists, []string(nil)
	if len(names) > 0 {
		op, vals = selection.In, names
	}
	byJob, err := labels.NewRequirement(logs.JobSetNameLabel, op, vals)
	if err != nil {
		return nil, fmt.Errorf("selecting the pods of %v: %w", names, err)
	}
	return labels.NewSelector().Add(*byJob), nil
}

// GetJob reads a TrainJob, its pods, its JobSet (for the initializer steps) and
// its runtime.
func GetJob(ctx context.Context, c client.Client, namespace, name string) (Job, error) {
	var job trainer.TrainJob
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &job); err != nil {
		return Job{}, fmt.Errorf("reading TrainJob %s/%s: %w", namespace, name, err)
	}
	sel, err := jobPodSelector(name)
	if err != nil {
		return Job{}, err
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return Job{}, fmt.Errorf("listing the pods of TrainJob %s/%s: %w", namespace, name, err)
	}
	return describeJob(&job, pods.Items, InitializerSteps(jobSetOf(ctx, c, namespace, name)), runtimeNodes(ctx, c, &job)), nil
}

// jobSetOf reads the TrainJob's JobSet; nil when it is not there or cannot be read.
func jobSetOf(ctx context.Context, c client.Client, namespace, name string) *jobsetv1alpha2.JobSet {
	var js jobsetv1alpha2.JobSet
	if c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &js) != nil {
		return nil
	}
	return &js
}

// ListJobs reads the namespace's TrainJobs, ordered by creation, each with its steps.
func ListJobs(ctx context.Context, c client.Client, namespace string) ([]Job, error) {
	var list trainer.TrainJobList
	if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing TrainJobs in namespace %s: %w", namespace, err)
	}
	sel, err := jobPodSelector()
	if err != nil {
		return nil, err
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("listing TrainJob pods in namespace %s: %w", namespace, err)
	}
	// The JobSets tell initializer jobs that are not named as their step; without
	// them (RBAC), those named so are still steps.
	initializers := map[string]map[string]string{}
	var jobSets jobsetv1alpha2.JobSetList
	if c.List(ctx, &jobSets, client.InNamespace(namespace)) == nil {
		for i := range jobSets.Items {
			initializers[jobSets.Items[i].Name] = InitializerSteps(&jobSets.Items[i])
		}
	}
	byJob := map[string][]corev1.Pod{}
	for _, p := range pods.Items {
		n := p.Labels[logs.JobSetNameLabel]
		byJob[n] = append(byJob[n], p)
	}
	sort.SliceStable(list.Items, func(i, j int) bool {
		a, b := list.Items[i], list.Items[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
	runtimes := map[string]*int32{}
	jobs := make([]Job, 0, len(list.Items))
	for i := range list.Items {
		job := &list.Items[i]
		var nodes *int32
		if job.Spec.Trainer == nil || job.Spec.Trainer.NumNodes == nil {
			key := job.Spec.RuntimeRef.Name + "/" + ptrString(job.Spec.RuntimeRef.Kind)
			if _, ok := runtimes[key]; !ok {
				runtimes[key] = runtimeNodes(ctx, c, job)
			}
			nodes = runtimes[key]
		}
		jobs = append(jobs, describeJob(job, byJob[job.Name], initializers[job.Name], nodes))
	}
	return jobs, nil
}

// OnRuntime keeps the TrainJobs whose runtimeRef names the runtime.
func OnRuntime(jobs []Job, runtime string) []Job {
	out := make([]Job, 0, len(jobs))
	for _, j := range jobs {
		if j.Runtime == runtime {
			out = append(out, j)
		}
	}
	return out
}

func ptrString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// runtimeNodes is the node count of the TrainJob's runtime (its
// mlPolicy.numNodes, else 1), nil when it cannot be read.
func runtimeNodes(ctx context.Context, c client.Client, job *trainer.TrainJob) *int32 {
	kind, err := runtime.RefKind(job.Spec.RuntimeRef)
	if err != nil {
		return nil
	}
	var spec *trainer.TrainingRuntimeSpec
	if kind == trainer.TrainingRuntimeKind {
		var rt trainer.TrainingRuntime
		if c.Get(ctx, client.ObjectKey{Namespace: job.Namespace, Name: job.Spec.RuntimeRef.Name}, &rt) != nil {
			return nil
		}
		spec = &rt.Spec
	} else {
		var crt trainer.ClusterTrainingRuntime
		if c.Get(ctx, client.ObjectKey{Name: job.Spec.RuntimeRef.Name}, &crt) != nil {
			return nil
		}
		spec = &crt.Spec
	}
	n := int32(1)
	if mp := spec.MLPolicy; mp != nil && mp.NumNodes != nil {
		n = *mp.NumNodes
	}
	return &n
}
