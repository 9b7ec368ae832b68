package optimizationjob

import (
	"hash/fnv"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/controller/optimizationjob/search"
	trainvalidation "github.com/trainyard/trainyard/pkg/validation"
)

// Default returns a copy of the spec with the API's defaults (what the API
// server stores for a job it admitted; the controller defaults in memory
// too, for a job written by an older CRD or a test).
func Default(spec *trainer.OptimizationJobSpec) *trainer.OptimizationJobSpec {
	s := spec.DeepCopy()
	if s.NumTrials == 0 {
		s.NumTrials = 1
	}
	if s.ParallelTrials == 0 {
		s.ParallelTrials = 1
	}
	if s.SearchAlgorithm == nil || (s.SearchAlgorithm.Random == nil && s.SearchAlgorithm.Grid == nil) {
		s.SearchAlgorithm = &trainer.SearchAlgorithm{Random: &trainer.RandomAlgorithm{}}
	}
	for i := range s.Objectives {
		if s.Objectives[i].Direction == "" {
			s.Objectives[i].Direction = trainer.ObjectiveDirectionMinimize
		}
	}
	return s
}

// seedOf is the random search's seed when the spec sets none: from the
// job's UID, so that it never changes for the object (a restart makes the
// same trials) while two jobs of the same spec search differently.
func seedOf(job *trainer.OptimizationJob) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(job.UID))
	return int64(h.Sum64())
}

// Prepare validates the job and returns its defaulted spec and its search.
// The errors are at the job's field paths: the API server's schema and
// rules again (a job stored while the CRD was older, or by a test), and
// what only Trainyard checks: the trials' names fit a TrainJob's, the
// parameters' env names are distinct, the template makes a valid TrainJob,
// the search spaces can be sampled.
func Prepare(job *trainer.OptimizationJob) (*trainer.OptimizationJobSpec, *search.Search, field.ErrorList) {
	spec := Default(&job.Spec)
	path := field.NewPath("spec")
	errs := validateSpec(path, spec)
	s, serrs := search.New(path, spec, seedOf(job))
	errs = append(errs, serrs...)
	if s != nil {
		errs = append(errs, validateName(job.Name, s.Trials())...)
	}
	if len(errs) == 0 {
		errs = append(errs, validateTrial(job, spec, s)...)
	}
	if len(errs) > 0 {
		return nil, nil, errs
	}
	return spec, s, nil
}

func validateSpec(path *field.Path, spec *trainer.OptimizationJobSpec) field.ErrorList {
	var errs field.ErrorList
	op := path.Child("objectives")
	if n := len(spec.Objectives); n != 1 {
		errs = append(errs, field.Invalid(op, n, "must have exactly one objective"))
	}
	for i, o := range spec.Objectives {
		if o.Metric == "" || len(o.Metric) > 64 {
			errs = append(errs, field.Invalid(op.Index(i).Child("metric"), o.Metric, "must be 1 to 64 characters"))
		}
		if o.Direction != trainer.ObjectiveDirectionMaximize && o.Direction != trainer.ObjectiveDirectionMinimize {
			errs = append(errs, field.NotSupported(op.Index(i).Child("direction"), o.Direction,
				[]string{string(trainer.ObjectiveDirectionMaximize), string(trainer.ObjectiveDirectionMinimize)}))
		}
	}
	if a := spec.SearchAlgorithm; a.Random != nil && a.Grid != nil {
		errs = append(errs, field.Invalid(path.Child("searchAlgorithm"), "random and grid", "exactly one of random or grid must be set"))
	}
	pp := path.Child("parameters")
	if n := len(spec.Parameters); n < 1 || n > 100 {
		errs = append(errs, field.Invalid(pp, n, "must have 1 to 100 parameters"))
	}
	names, envs := sets.New[string](), map[string]string{}
	for i, p := range spec.Parameters {
		np := pp.Index(i).Child("name")
		switch {
		case !validName(p.Name):
			errs = append(errs, field.Invalid(np, p.Name, "must be 1 to 64 letters, digits or underscores, not starting with a digit"))
		case names.Has(p.Name):
			errs = append(errs, field.Duplicate(np, p.Name))
		case envs[EnvName(p.Name)] != "":
			errs = append(errs, field.Invalid(np, p.Name, "gives the trials the same environment variable "+EnvName(p.Name)+" as parameter "+envs[EnvName(p.Name)]))
		}
		names.Insert(p.Name)
		envs[EnvName(p.Name)] = p.Name
	}
	for _, c := range []struct {
		name string
		v    int32
	}{{"numTrials", spec.NumTrials}, {"parallelTrials", spec.ParallelTrials}} {
		if c.v < 1 || c.v > 100 {
			errs = append(errs, field.Invalid(path.Child(c.name), c.v, "must be between 1 and 100"))
		}
	}
	if spec.ParallelTrials > spec.NumTrials {
		errs = append(errs, field.Invalid(path.Child("parallelTrials"), spec.ParallelTrials, "parallelTrials cannot exceed numTrials"))
	}
	mp := path.Child("trainJobTemplate", "metadata")
	if m := spec.TrainJobTemplate.ObjectMeta; m.Name != "" || m.Namespace != "" || m.GenerateName != "" {
		errs = append(errs, field.Forbidden(mp, "name and namespace cannot be set in a template: each trial is named <name>-trial-<i>, in the OptimizationJob's namespace"))
	}
	return errs
}

// validName is the API's parameter name pattern, ^[A-Za-z_][A-Za-z0-9_]*$, 1 to 64 characters.
func validName(s string) bool {
	if s == "" || len(s) > 64 || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for _, r := range s {
		switch {
		case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		default:
			return false
		}
	}
	return true
}

// validateName checks that every trial's name is a valid TrainJob name: a
// DNS-1035 label of at most 63 characters.
func validateName(name string, trials int) field.ErrorList {
	path := field.NewPath("metadata", "name")
	longest := TrialName(name, max(trials-1, 0))
	if msgs := validation.IsDNS1035Label(longest); len(msgs) > 0 {
		if len(longest) > validation.DNS1035LabelMaxLength {
			return field.ErrorList{field.TooLong(path, name, validation.DNS1035LabelMaxLength-len(longest)+len(name))}
		}
		return field.ErrorList{field.Invalid(path, name, "must start with a lower-case letter and be a DNS-1035 label: trials are TrainJobs named "+longest+", ... ("+strings.Join(msgs, "; ")+")")}
	}
	return nil
}

// validateTrial checks the first trial's TrainJob with the TrainJob's own
// rules (those that need no runtime: the TrainJob webhook and controller
// check the rest on each trial), with the errors at the template's paths.
func validateTrial(job *trainer.OptimizationJob, spec *trainer.OptimizationJobSpec, s *search.Search) field.ErrorList {
	j := job.DeepCopy()
	j.Spec = *spec
	tj := newTrial(j, 0, s.Trial(0))
	var out field.ErrorList
	for _, e := range trainvalidation.ValidateTrainJob(nil, tj) {
		if strings.HasPrefix(e.Field, "metadata.name") {
			continue // validateName's
		}
		if rest, ok := strings.CutPrefix(e.Field, "spec"); ok {
			e.Field = "spec.trainJobTemplate.spec" + rest
		}
		out = append(out, e)
	}
	return out
}
