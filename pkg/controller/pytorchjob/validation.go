package pytorchjob

import (
	"fmt"
	"slices"
	"strings"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
)

var (
	specPath     = field.NewPath("spec")
	replicasPath = specPath.Child("pytorchReplicaSpecs")
	runPolicy    = specPath.Child("runPolicy")
)

// Validate checks a PyTorchJob as written (before defaulting) with
// training-operator v1.9's rules, plus the few checks that keep Trainyard from
// producing objects the API server would reject. oldJob is nil on create.
// Warnings are for deprecated settings; errors name the field.
//
// Unlike v1.9's webhook, replica type keys are accepted in any case ("master"),
// as the operators before it did; the defaulting renames them.
func Validate(oldJob, job *kubeflowv1.PyTorchJob) ([]string, field.ErrorList) {
	var errs field.ErrorList
	var warnings []string
	if msgs := validation.IsDNS1035Label(job.Name); len(msgs) > 0 {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), job.Name, strings.Join(msgs, "; ")))
	}
	errs = append(errs, validateRunPolicy(oldJob, job)...)

	if ep := job.Spec.ElasticPolicy; ep != nil {
		epPath := specPath.Child("elasticPolicy")
		if findType(job.Spec.PyTorchReplicaSpecs, kubeflowv1.PyTorchJobReplicaTypeWorker) == nil {
			errs = append(errs, field.Required(replicasPath.Key(string(kubeflowv1.PyTorchJobReplicaTypeWorker)), "must be configured if elastic policy is used"))
		}
		if ep.NProcPerNode != nil {
			warnings = append(warnings, fmt.Sprintf("%s is deprecated, use %s instead", epPath.Child("nProcPerNode"), specPath.Child("nprocPerNode")))
			if job.Spec.NprocPerNode != nil {
				errs = append(errs, field.Forbidden(epPath.Child("nProcPerNode"), fmt.Sprintf("must not be used with %s", specPath.Child("nprocPerNode"))))
			}
		}
		if ep.MinReplicas != nil && *ep.MinReplicas < 1 {
			errs = append(errs, field.Invalid(epPath.Child("minReplicas"), *ep.MinReplicas, "must be at least 1"))
		}
		if ep.MinReplicas != nil && ep.MaxReplicas != nil && *ep.MaxReplicas < *ep.MinReplicas {
			errs = append(errs, field.Invalid(epPath.Child("maxReplicas"), *ep.MaxReplicas, "must not be less than minReplicas"))
		}
	}
	errs = append(errs, validateReplicaSpecs(job.Spec.PyTorchReplicaSpecs)...)
	if len(errs) == 0 {
		errs = append(errs, validateNameLength(job)...)
	}
	return warnings, errs
}

// Ignored returns a warning for each field of the job that Trainyard accepts,
// as v1 did, but does nothing with. The webhook adds them to its admission
// warnings; they are not errors, so a job written for v1 still runs.
//
// spec.elasticPolicy.metrics made v1 create a HorizontalPodAutoscaler that
// scaled the workers between minReplicas and maxReplicas; Trainyard creates
// none, so the worker count stays as written.
func Ignored(job *kubeflowv1.PyTorchJob) []string {
	var warnings []string
	if ep := job.Spec.ElasticPolicy; ep != nil && len(ep.Metrics) > 0 {
		warnings = append(warnings, fmt.Sprintf("%s is ignored: Trainyard creates no HorizontalPodAutoscaler, so the workers are not scaled by these metrics and stay at %s",
			specPath.Child("elasticPolicy", "metrics"), replicasPath.Key(string(kubeflowv1.PyTorchJobReplicaTypeWorker)).Child("replicas")))
	}
	return warnings
}

func validateRunPolicy(oldJob, job *kubeflowv1.PyTorchJob) field.ErrorList {
	var errs field.ErrorList
	rp := job.Spec.RunPolicy
	if m := rp.ManagedBy; m != nil && *m != kubeflowv1.KubeflowJobsController && *m != kubeflowv1.MultiKueueController {
		errs = append(errs, field.NotSupported(runPolicy.Child("managedBy"), *m,
			[]string{kubeflowv1.KubeflowJobsController, kubeflowv1.MultiKueueController}))
	}
	if oldJob != nil {
		errs = append(errs, apivalidation.ValidateImmutableField(rp.ManagedBy, oldJob.Spec.RunPolicy.ManagedBy, runPolicy.Child("managedBy"))...)
	}
	if p := rp.CleanPodPolicy; p != nil && !slices.Contains([]kubeflowv1.CleanPodPolicy{
		kubeflowv1.CleanPodPolicyAll, kubeflowv1.CleanPodPolicyRunning, kubeflowv1.CleanPodPolicyNone}, *p) {
		errs = append(errs, field.NotSupported(runPolicy.Child("cleanPodPolicy"), *p, []kubeflowv1.CleanPodPolicy{
			kubeflowv1.CleanPodPolicyAll, kubeflowv1.CleanPodPolicyRunning, kubeflowv1.CleanPodPolicyNone}))
	}
	if v := rp.BackoffLimit; v != nil && *v < 0 {
		errs = append(errs, field.Invalid(runPolicy.Child("backoffLimit"), *v, "must be greater than or equal to 0"))
	}
	if v := rp.ActiveDeadlineSeconds; v != nil && *v < 1 {
		errs = append(errs, field.Invalid(runPolicy.Child("activeDeadlineSeconds"), *v, "must be a positive integer"))
	}
	if v := rp.TTLSecondsAfterFinished; v != nil && *v < 0 {
		errs = append(errs, field.Invalid(runPolicy.Child("ttlSecondsAfterFinished"), *v, "must be greater than or equal to 0"))
	}
	return errs
}

var restartPolicies = []kubeflowv1.RestartPolicy{kubeflowv1.RestartPolicyAlways, kubeflowv1.RestartPolicyOnFailure,
	kubeflowv1.RestartPolicyNever, kubeflowv1.RestartPolicyExitCode}

func validateReplicaSpecs(specs map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec) field.ErrorList {
	var errs field.ErrorList
	if len(specs) == 0 {
		return field.ErrorList{field.Required(replicasPath, "must be required")}
	}
	keys := make([]kubeflowv1.ReplicaType, 0, len(specs))
	for k := range specs {
		keys = append(keys, k)
	}
	slices.Sort(keys) // report errors in a stable order
	seen := map[kubeflowv1.ReplicaType]kubeflowv1.ReplicaType{}
	for _, key := range keys {
		rs := specs[key]
		path := replicasPath.Key(string(key))
		rtype := canonicalType(key)
		if rtype == "" {
			errs = append(errs, field.NotSupported(path, key, []kubeflowv1.ReplicaType{
				kubeflowv1.PyTorchJobReplicaTypeMaster, kubeflowv1.PyTorchJobReplicaTypeWorker}))
		} else if prev, dup := seen[rtype]; dup {
			errs = append(errs, field.Duplicate(path, fmt.Sprintf("%s is the same replica type as %s", key, prev)))
		} else {
			seen[rtype] = key
		}
		containers := path.Child("template", "spec", "containers")
		if rs == nil || len(rs.Template.Spec.Containers) == 0 {
			errs = append(errs, field.Required(containers, "must be specified"))
			continue
		}
		hasDefault := false
		for i, c := range rs.Template.Spec.Containers {
			if c.Image == "" {
				errs = append(errs, field.Required(containers.Index(i).Child("image"), "must be required"))
			}
			if c.Name == kubeflowv1.PyTorchJobDefaultContainerName {
				hasDefault = true
			}
		}
		if !hasDefault {
			errs = append(errs, field.Required(containers, fmt.Sprintf("must have at least one container with name %s", kubeflowv1.PyTorchJobDefaultContainerName)))
		}
		if rtype == kubeflowv1.PyTorchJobReplicaTypeMaster {
			if rs.Replicas == nil || *rs.Replicas != 1 {
				errs = append(errs, field.Forbidden(path.Child("replicas"), "must be 1"))
			}
		} else if rs.Replicas != nil && *rs.Replicas < 1 {
			errs = append(errs, field.Forbidden(path.Child("replicas"), "must be at least 1"))
		}
		if rs.RestartPolicy != "" && !slices.Contains(restartPolicies, rs.RestartPolicy) {
			errs = append(errs, field.NotSupported(path.Child("restartPolicy"), rs.RestartPolicy, restartPolicies))
		}
	}
	return errs
}

// findType returns the spec of a role whatever the case of its key.
func findType(specs map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec, t kubeflowv1.ReplicaType) *kubeflowv1.ReplicaSpec {
	if rs, ok := specs[t]; ok {
		return rs
	}
	for k, rs := range specs {
		if canonicalType(k) == t {
			return rs
		}
	}
	return nil
}

// maxHostname is the limit of a pod host name (a DNS label).
const maxHostname = validation.DNS1123LabelMaxLength

// validateNameLength rejects names for which <job>-<replicated job>-0-0 would
// not be a DNS label: JobSet names each Job <job>-<replicated job>-0, and
// Trainyard's pods carry that name (and were named <job>-<replicated job>-0-0
// before each replica got v1's host name <job>-<type>-<i>). v1 itself limited
// names through its <job>-worker-<i> Services.
func validateNameLength(job *kubeflowv1.PyTorchJob) field.ErrorList {
	d := Defaulted(job)
	workers := int(Replicas(d, kubeflowv1.PyTorchJobReplicaTypeWorker))
	if ep := d.Spec.ElasticPolicy; ep != nil && ep.MaxReplicas != nil && int(*ep.MaxReplicas) > workers {
		workers = int(*ep.MaxReplicas)
	}
	longest := fmt.Sprintf("%s-%s-0-0", job.Name, MasterJob)
	if workers > 0 {
		longest = fmt.Sprintf("%s-%s-0-0", job.Name, WorkerJob(workers-1))
	}
	if len(longest) <= maxHostname {
		return nil
	}
	return field.ErrorList{field.TooLong(field.NewPath("metadata", "name"), job.Name, len(job.Name)-(len(longest)-maxHostname))}
}
