package cli

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/cli/logs"
	"github.com/trainyard/trainyard/pkg/processnode/gpus"
)

// Pod labels and the environment variable the steps are derived from.
const (
	ReplicatedJobLabel = "jobset.sigs.k8s.io/replicatedjob-name"
	LauncherJob        = "launcher"
	NodeJob            = "node"
	EnvNumProcPerNode  = "PET_NPROC_PER_NODE"
)

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
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	Steps   []Step `json:"steps"`
	// TrainerStatus is the progress the training code reported (status.trainerStatus).
	TrainerStatus *trainer.TrainerStatus `json:"trainerStatus,omitempty"`
}

// Step is one pod of a TrainJob.
type Step struct {
	// Name is node-<rank> for the trainer's pods, the container name for initializers.
	Name        string `json:"name"`
	Status      string `json:"status"`
	Pod         string `json:"pod"`
	Device      string `json:"device"`
	DeviceCount string `json:"deviceCount"`
	// Message is why a failed step's container ended, when its pod says
	// (the termination message; with terminationMessagePolicy
	// FallbackToLogsOnError, the end of its log).
	Message string `json:"message,omitempty"`
	// GPUs are the UUIDs of the GPUs the step's container was given, when
	// the node that runs it says (a process node's pod annotation).
	GPUs []string `json:"gpus,omitempty"`
}

// String is the SDK's line for a step.
func (s Step) String() string {
	return fmt.Sprintf("Step: %s, Status: %s, Devices: %s x %s", s.Name, s.Status, s.Device, s.DeviceCount)
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
// runtime (for the number of nodes when the TrainJob does not set it).
func NewJob(job *trainer.TrainJob, pods []corev1.Pod, rt *Runtime) Job {
	return newJob(job, pods, nil, rt)
}

func newJob(job *trainer.TrainJob, pods []corev1.Pod, initializers map[string]string, rt *Runtime) Job {
	j := Job{Name: job.Name, Namespace: job.Namespace, Runtime: job.Spec.RuntimeRef.Name,
		CreationTimestamp: job.CreationTimestamp, Steps: StepsOf(pods, initializers),
		Status: string(job.Status.Phase), Reason: job.Status.Reason, Message: job.Status.Message,
		TrainerStatus: job.Status.TrainerStatus}
	switch {
	case job.Spec.Trainer != nil && job.Spec.Trainer.NumNodes != nil:
		j.NumNodes = *job.Spec.Trainer.NumNodes
	case job.Status.NumNodes != nil:
		j.NumNodes = *job.Status.NumNodes
	case rt != nil:
		j.NumNodes = rt.NumNodes
	}
	if j.Status == "" {
		j.Status, j.Reason, j.Message = sdkStatus(job, j.Steps, j.NumNodes)
	}
	return j
}

// sdkStatus is the SDK's status of a TrainJob: Complete or Failed from the
// conditions, else Running when every node's pod runs (or ran), else Created.
func sdkStatus(job *trainer.TrainJob, steps []Step, numNodes int32) (status, reason, message string) {
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
func Steps(pods []corev1.Pod) []Step { return StepsOf(pods, nil) }

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

// terminationMessage is the termination message of a pod's container, trimmed.
func terminationMessage(p *corev1.Pod, container string) string {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == container && cs.State.Terminated != nil {
			return strings.TrimSpace(cs.State.Terminated.Message)
		}
	}
	return ""
}

// StepsOf is Steps with the initializer steps of the JobSet (InitializerSteps).
func StepsOf(pods []corev1.Pod, initializers map[string]string) []Step {
	launcher := false
	for _, p := range pods {
		if p.Labels[ReplicatedJobLabel] == LauncherJob {
			launcher = true
		}
	}
	type row struct {
		Step
		rank    int
		created metav1.Time
	}
	var rows []row
	for _, p := range pods {
		rj := p.Labels[ReplicatedJobLabel]
		r := row{Step: Step{Status: string(p.Status.Phase), Pod: p.Name}, rank: -1, created: p.CreationTimestamp}
		container := NodeJob
		if step := StepOf(&p, initializers); step != "" {
			rj = step
		}
		switch rj {
		case trainer.AncestorDatasetInitializer, trainer.AncestorModelInitializer:
			container = rj
			r.Name = rj
		case LauncherJob, NodeJob:
			rank, ok := logs.Rank(&p)
			if !ok {
				continue
			}
			if launcher && rj == NodeJob {
				rank++
			}
			if rj == LauncherJob {
				container = LauncherJob
			}
			r.Name, r.rank = "node-"+strconv.Itoa(rank), rank
		default:
			continue
		}
		if r.Status == "" {
			r.Status = Unknown
		}
		r.Device, r.DeviceCount = stepDevice(&p, container)
		r.GPUs = stepGPUs(&p, container)
		if p.Status.Phase == corev1.PodFailed {
			r.Message = terminationMessage(&p, container)
		}
		rows = append(rows, r)
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
	steps := make([]Step, 0, len(rows))
	for _, r := range rows {
		steps = append(steps, r.Step)
	}
	return steps
}

// stepGPUs are the UUIDs of the GPUs a step's container was given, as the
// process node that runs it names them on the pod (gpus.Annotation); none
// from other nodes, whose device plugins do not say.
func stepGPUs(p *corev1.Pod, container string) []string {
	v, ok := p.Annotations[gpus.Annotation]
	c := findContainer(p, container)
	if !ok || c == nil {
		return nil
	}
	return gpus.ParseAnnotation(v)[c.Name]
}

// stepDevice is the device and count of a step's container: from its limits
// (Device), the count from a numeric PET_NPROC_PER_NODE (torchrun's processes
// per node); Unknown without the container.
func stepDevice(p *corev1.Pod, container string) (device, count string) {
	c := findContainer(p, container)
	if c == nil {
		return Unknown, Unknown
	}
	device, count = Device(c.Resources)
	for _, e := range c.Env {
		if e.Name == EnvNumProcPerNode && isCount(e.Value) {
			count = e.Value
		}
	}
	return device, count
}

func findContainer(p *corev1.Pod, name string) *corev1.Container {
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Name == name {
			return &p.Spec.Containers[i]
		}
	}
	if len(p.Spec.Containers) == 1 {
		return &p.Spec.Containers[0]
	}
	return nil
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
	return newJob(&job, pods.Items, InitializerSteps(jobSetOf(ctx, c, namespace, name)), runtimeOf(ctx, c, &job)), nil
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
	runtimes := map[string]*Runtime{}
	jobs := make([]Job, 0, len(list.Items))
	for i := range list.Items {
		job := &list.Items[i]
		var rt *Runtime
		if job.Spec.Trainer == nil || job.Spec.Trainer.NumNodes == nil {
			key := job.Spec.RuntimeRef.Name + "/" + ptrString(job.Spec.RuntimeRef.Kind)
			if _, ok := runtimes[key]; !ok {
				runtimes[key] = runtimeOf(ctx, c, job)
			}
			rt = runtimes[key]
		}
		jobs = append(jobs, newJob(job, byJob[job.Name], initializers[job.Name], rt))
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
