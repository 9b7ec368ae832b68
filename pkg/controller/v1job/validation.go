package v1job

import (
	"fmt"
	"slices"
	"strings"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
)

var runPolicyPath = field.NewPath("spec", "runPolicy")

// Validate checks a job as written (before defaulting) with v1's rules, plus
// the few that keep Trainyard from making objects the API server would
// reject; oldJob is nil on create. Errors name the field. Replica type keys
// are accepted in any case, as v1's defaulting renamed them.
func (d *Def) Validate(oldJob, job Job) field.ErrorList {
	var errs field.ErrorList
	if msgs := validation.IsDNS1035Label(job.GetName()); len(msgs) > 0 {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), job.GetName(), strings.Join(msgs, "; ")))
	}
	errs = append(errs, validateRunPolicy(oldJob, job)...)
	errs = append(errs, d.validateReplicaSpecs(job.ReplicaSpecs())...)
	if d.ValidateKind != nil {
		errs = append(errs, d.ValidateKind(job)...)
	}
	if len(errs) == 0 {
		errs = append(errs, d.validateNameLength(job)...)
	}
	return errs
}

func validateRunPolicy(oldJob, job Job) field.ErrorList {
	var errs field.ErrorList
	rp := job.JobRunPolicy()
	if m := rp.ManagedBy; m != nil && *m != kubeflowv1.KubeflowJobsController && *m != kubeflowv1.MultiKueueController {
		errs = append(errs, field.NotSupported(runPolicyPath.Child("managedBy"), *m,
			[]string{kubeflowv1.KubeflowJobsController, kubeflowv1.MultiKueueController}))
	}
	if oldJob != nil {
		errs = append(errs, apivalidation.ValidateImmutableField(rp.ManagedBy, oldJob.JobRunPolicy().ManagedBy, runPolicyPath.Child("managedBy"))...)
	}
	if p := rp.CleanPodPolicy; p != nil && !slices.Contains(cleanPodPolicies, *p) {
		errs = append(errs, field.NotSupported(runPolicyPath.Child("cleanPodPolicy"), *p, cleanPodPolicies))
	}
	if v := rp.BackoffLimit; v != nil && *v < 0 {
		errs = append(errs, field.Invalid(runPolicyPath.Child("backoffLimit"), *v, "must be greater than or equal to 0"))
	}
	if v := rp.ActiveDeadlineSeconds; v != nil && *v < 1 {
		errs = append(errs, field.Invalid(runPolicyPath.Child("activeDeadlineSeconds"), *v, "must be a positive integer"))
	}
	if v := rp.TTLSecondsAfterFinished; v != nil && *v < 0 {
		errs = append(errs, field.Invalid(runPolicyPath.Child("ttlSecondsAfterFinished"), *v, "must be greater than or equal to 0"))
	}
	return errs
}

var (
	cleanPodPolicies = []kubeflowv1.CleanPodPolicy{kubeflowv1.CleanPodPolicyAll, kubeflowv1.CleanPodPolicyRunning, kubeflowv1.CleanPodPolicyNone}
	restartPolicies  = []kubeflowv1.RestartPolicy{kubeflowv1.RestartPolicyAlways, kubeflowv1.RestartPolicyOnFailure,
		kubeflowv1.RestartPolicyNever, kubeflowv1.RestartPolicyExitCode}
)

// ValidCleanPodPolicy reports whether p is a clean pod policy v1 knows.
func ValidCleanPodPolicy(p kubeflowv1.CleanPodPolicy) bool {
	return slices.Contains(cleanPodPolicies, p)
}

// CleanPodPolicies are the clean pod policies v1 knows.
func CleanPodPolicies() []kubeflowv1.CleanPodPolicy { return slices.Clone(cleanPodPolicies) }

func (d *Def) validateReplicaSpecs(specs map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec) field.ErrorList {
	path := d.specsPath()
	if len(specs) == 0 {
		return field.ErrorList{field.Required(path, "must be required")}
	}
	var errs field.ErrorList
	keys := make([]kubeflowv1.ReplicaType, 0, len(specs))
	for k := range specs {
		keys = append(keys, k)
	}
	slices.Sort(keys) // report errors in a stable order
	seen := map[kubeflowv1.ReplicaType]kubeflowv1.ReplicaType{}
	for _, key := range keys {
		rs := specs[key]
		p := path.Key(string(key))
		rtype := d.canonicalType(key)
		if rtype == "" {
			errs = append(errs, field.NotSupported(p, key, d.Roles))
		} else if prev, dup := seen[rtype]; dup {
			errs = append(errs, field.Duplicate(p, fmt.Sprintf("%s is the same replica type as %s", key, prev)))
		} else {
			seen[rtype] = key
		}
		containers := p.Child("template", "spec", "containers")
		if rs == nil || len(rs.Template.Spec.Containers) == 0 {
			errs = append(errs, field.Required(containers, "must be specified"))
			continue
		}
		hasDefault := false
		for i, c := range rs.Template.Spec.Containers {
			if c.Image == "" {
				errs = append(errs, field.Required(containers.Index(i).Child("image"), "must be required"))
			}
			if c.Name == d.Container {
				hasDefault = true
			}
		}
		if d.Container != "" && !hasDefault {
			errs = append(errs, field.Required(containers, fmt.Sprintf("must have at least one container with name %s", d.Container)))
		}
		switch {
		case slices.Contains(d.Single, rtype):
			if rs.Replicas != nil && *rs.Replicas != 1 {
				errs = append(errs, field.Forbidden(p.Child("replicas"), "must be 1"))
			}
		case rs.Replicas != nil && *rs.Replicas < 0:
			errs = append(errs, field.Forbidden(p.Child("replicas"), "must not be negative"))
		}
		if rs.RestartPolicy != "" && !slices.Contains(restartPolicies, rs.RestartPolicy) {
			errs = append(errs, field.NotSupported(p.Child("restartPolicy"), rs.RestartPolicy, restartPolicies))
		}
	}
	for _, t := range d.Required {
		if _, ok := seen[t]; !ok {
			errs = append(errs, field.Required(path.Key(string(t)), fmt.Sprintf("a %s must have a %s", d.Kind, t)))
		}
	}
	return errs
}

// maxHostname is the limit of a pod host name (a DNS label).
const maxHostname = validation.DNS1123LabelMaxLength

// validateNameLength rejects names for which the longest pod name
// <job>-<replicated job>-0-<5 random characters> (JobSet names each Job
// <job>-<replicated job>-0) or host name <job>-<type>-<i> would not be a DNS
// label.
func (d *Def) validateNameLength(job Job) field.ErrorList {
	dj := d.Defaulted(job)
	longest := ""
	for _, t := range d.RolesOf(dj) {
		n := max(int(replicas(dj, t)), 1)
		if s := fmt.Sprintf("%s-%s-0-xxxxx", job.GetName(), ReplicatedJobName(t, n-1)); len(s) > len(longest) {
			longest = s
		}
	}
	if len(longest) <= maxHostname {
		return nil
	}
	return field.ErrorList{field.TooLong(field.NewPath("metadata", "name"), job.GetName(), len(job.GetName())-(len(longest)-maxHostname))}
}
