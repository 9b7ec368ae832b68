// Package jobset turns the finished Info into the JobSet that runs a job,
// and tells what the observed JobSet says of it (framework.Facts).
package jobset

// +kubebuilder:rbac:groups=jobset.x-k8s.io,resources=jobsets,verbs=get;list;watch;create;update;patch;delete

import (
	"fmt"
	"maps"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/observe"
	"github.com/trainyard/trainyard/pkg/plan"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
)

// Name of the plugin.
const Name = "JobSet"

// JobSet is the plugin.
type JobSet struct{}

var (
	_ framework.ValidatePlugin = (*JobSet)(nil)
	_ framework.BuildPlugin    = (*JobSet)(nil)
	_ framework.OwnerPlugin    = (*JobSet)(nil)
	_ framework.StatusPlugin   = (*JobSet)(nil)
)

// New returns the plugin.
func New() *JobSet { return &JobSet{} }

// Name implements framework.Plugin.
func (*JobSet) Name() string { return Name }

// Owns implements framework.OwnerPlugin.
func (*JobSet) Owns() []client.Object { return []client.Object{&jobsetv1alpha2.JobSet{}} }

// Validate checks what every runtime needs to run a TrainJob: replicated jobs
// bound to TrainJob fields exist once, their names are short enough, the
// TrainJob asks for no negative node count, and the pod host names JobSet will generate fit in a DNS label.
func (*JobSet) Validate(info *runtime.Info, req *runtime.Request) field.ErrorList {
	var errs field.ErrorList
	rtPath := req.Paths.Runtime
	if len(info.Spec.ReplicatedJobs) == 0 {
		errs = append(errs, field.Invalid(rtPath, info.Runtime.Name,
			fmt.Sprintf("runtime %s %q has no replicated jobs in spec.template.spec", info.Runtime.Kind, info.Runtime.Name)))
	}
	if req.Trainer != nil && info.TrainerJob == "" {
		errs = append(errs, field.Invalid(req.Paths.Trainer, "",
			fmt.Sprintf("runtime %s %q has no replicated job labelled %s=%s", info.Runtime.Kind, info.Runtime.Name,
				trainer.AncestorLabel, trainer.AncestorTrainer)))
	}
	// Kubeflow Trainer v2.4 limits a runtime's replicated job names; a runtime
	// stored before (or with its webhook off) is reported here, at the job's
	// reference to it, with the runtime's own field path.
	rjPath := field.NewPath("spec", "template", "spec", "replicatedJobs")
	for i, rj := range info.Runtime.Spec.Template.Spec.ReplicatedJobs {
		if err := runtime.CheckReplicatedJobName(rjPath.Index(i).Child("name"), rj.Name); err != nil {
			errs = append(errs, field.Invalid(rtPath, info.Runtime.Name, fmt.Sprintf("runtime %s %q: %v", info.Runtime.Kind, info.Runtime.Name, err)))
		}
	}
	if err := runtime.CheckTrainerNumNodes(req.Paths.Trainer.Child("numNodes"), info.NumNodes); err != nil {
		errs = append(errs, err)
	}
	return append(errs, validatePodNames(info, req)...)
}

// podNameSuffix is what the Job controller appends to a Job's name for its pods.
const podNameSuffix = len("-xxxxx")

// validatePodNames: JobSet names pods <trainjob>-<replicated job>-<job index>-<pod index>
// and the Job controller adds a 5-character suffix; the host name must stay a
// DNS label (63 characters), or the pods can never be created. The tightest
// limit is reported once, with the host name that sets it.
func validatePodNames(info *runtime.Info, req *runtime.Request) field.ErrorList {
	maxLen, example := validation.DNS1035LabelMaxLength, ""
	for _, rj := range info.Spec.ReplicatedJobs {
		if rj.Template.Spec.Template.Spec.Hostname != "" {
			// The pods' host name is the template's (a PyTorchJob's v1
			// names), not one the Job controller derives from the JobSet's.
			continue
		}
		replicas := max(rj.Replicas, 1)
		pods := ptr.Deref(rj.Template.Spec.Parallelism, 1)
		if rj.Name == info.TrainerJob {
			replicas, pods = 1, info.NumNodes
		}
		rest := fmt.Sprintf("-%s-%d-%d", rj.Name, replicas-1, max(pods-1, 0))
		if allowed := validation.DNS1035LabelMaxLength - len(rest) - podNameSuffix; allowed < maxLen {
			maxLen, example = allowed, "<name>"+rest+"-xxxxx"
		}
	}
	if len(req.Name) <= maxLen {
		return nil
	}
	return field.ErrorList{field.Invalid(req.Paths.Name, req.Name,
		fmt.Sprintf("must be no more than %d characters on this runtime: pod host names %s must fit in %d characters",
			maxLen, example, validation.DNS1035LabelMaxLength))}
}

// Build emits the JobSet: named after the TrainJob, with the runtime's (and
// patches') labels and annotations, the trainer job running NumNodes pods as one
// Indexed Job, and the TrainJob's suspend flag.
func (*JobSet) Build(info *runtime.Info, req *runtime.Request) ([]plan.Child, error) {
	spec := *info.Spec.DeepCopy()
	for k := range spec.ReplicatedJobs {
		rj := &spec.ReplicatedJobs[k]
		ancestor := rj.Template.Labels[trainer.AncestorLabel]
		if ancestor == "" {
			continue
		}
		// Jobs bound to TrainJob fields run once; the trainer's scale is its
		// parallelism, so that node ranks are the completion indexes 0..N-1.
		rj.Replicas = 1
		if ancestor == trainer.AncestorTrainer {
			rj.Template.Spec.Parallelism = ptr.To(info.NumNodes)
			rj.Template.Spec.Completions = ptr.To(info.NumNodes)
			if rj.Template.Spec.CompletionMode == nil {
				rj.Template.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
			}
		}
	}
	// A queue-managed JobSet starts suspended; the queue unsuspends it on admission.
	spec.Suspend = ptr.To(req.Suspend || info.QueueName != "")
	js := &jobsetv1alpha2.JobSet{
		TypeMeta: metav1.TypeMeta{APIVersion: jobsetv1alpha2.GroupVersion.String(), Kind: "JobSet"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        req.Name,
			Namespace:   req.Namespace,
			Labels:      maps.Clone(info.Labels),
			Annotations: maps.Clone(info.Annotations),
		},
		Spec: spec,
	}
	return []plan.Child{plan.JobSet(js)}, nil
}

// Status implements framework.StatusPlugin: how the observed JobSet
// finished, and its replicated jobs' counts (observe reads both).
func (*JobSet) Status(name string, obs *observe.Observed, facts *framework.Facts) {
	js := obs.JobSet(name)
	if js == nil {
		return
	}
	if f, ok := observe.Finished(js); ok {
		facts.Finished = &f
	}
	facts.Jobs = observe.Counts(js)
}
