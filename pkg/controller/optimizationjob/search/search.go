// Package search makes the parameters of an OptimizationJob's trials, in
// process: random search (seeded, so the same seed gives the same trials)
// and grid search (every combination of the categorical choices, in order,
// up to numTrials). Trial i's parameters are a pure function of the spec,
// the seed and i, so a restarted controller makes the same trial again, and
// trials may be made in any order.
package search

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"

	"k8s.io/apimachinery/pkg/util/validation/field"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// kind is how one parameter is sampled.
type kind int

const (
	uniform kind = iota
	logUniform
	categorical
)

// param is one parameter's search space, parsed.
type param struct {
	name     string
	kind     kind
	integer  bool
	min, max float64
	// lo, hi bound an Int parameter's values (the whole numbers in [min, max]).
	lo, hi  int64
	choices []string
}

// Search makes the parameters of each trial of one OptimizationJob.
type Search struct {
	params []param
	grid   bool
	seed   uint64
	trials int
}

// New parses the spec's search. seed is the random search's seed when the
// spec sets none (the caller derives it from the job, so it never changes).
// Errors are at the spec's field paths (under path, the spec's own): what
// the API server's schema and rules let through but cannot be searched
// (a min that is not a number Go parses, an Int range without a whole
// number in it, grid search on a parameter that is not categorical).
func New(path *field.Path, spec *trainer.OptimizationJobSpec, seed int64) (*Search, field.ErrorList) {
	s := &Search{seed: uint64(seed)}
	if a := spec.SearchAlgorithm; a != nil {
		if a.Grid != nil {
			s.grid = true
		} else if a.Random != nil && a.Random.Seed != nil {
			s.seed = uint64(*a.Random.Seed)
		}
	}
	var errs field.ErrorList
	for i := range spec.Parameters {
		p, perrs := parse(path.Child("parameters").Index(i), &spec.Parameters[i], s.grid)
		errs = append(errs, perrs...)
		s.params = append(s.params, p)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	s.trials = int(max(spec.NumTrials, 1))
	if s.grid {
		s.trials = s.gridSize(s.trials)
	}
	return s, nil
}

// Trials is how many trials the search runs: numTrials, or, for grid
// search, the number of combinations when there are fewer.
func (s *Search) Trials() int { return s.trials }

// Grid reports whether the search is a grid search.
func (s *Search) Grid() bool { return s.grid }

// Trial returns the parameters of trial i (0 <= i < Trials()), in the
// spec's order.
func (s *Search) Trial(i int) []trainer.ParameterAssignment {
	out := make([]trainer.ParameterAssignment, len(s.params))
	if s.grid {
		// Mixed radix, the last parameter changing fastest.
		rest := i
		for k := len(s.params) - 1; k >= 0; k-- {
			n := len(s.params[k].choices)
			out[k] = trainer.ParameterAssignment{Name: s.params[k].name, Value: s.params[k].choices[rest%n]}
			rest /= n
		}
		return out
	}
	// One stream per trial: trial i's values do not depend on which
	// trials were made before it.
	rng := rand.New(rand.NewPCG(s.seed, uint64(i)))
	for k, p := range s.params {
		out[k] = trainer.ParameterAssignment{Name: p.name, Value: p.sample(rng)}
	}
	return out
}

// gridSize is the number of combinations, or limit when there are more.
func (s *Search) gridSize(limit int) int {
	n := 1
	for _, p := range s.params {
		n *= len(p.choices)
		if n >= limit {
			return limit
		}
	}
	return n
}

// sample draws one value of p.
func (p param) sample(rng *rand.Rand) string {
	switch p.kind {
	case categorical:
		return p.choices[rng.IntN(len(p.choices))]
	case logUniform:
		v := math.Exp(math.Log(p.min) + rng.Float64()*(math.Log(p.max)-math.Log(p.min)))
		if p.integer {
			return strconv.FormatInt(min(max(int64(math.Round(v)), p.lo), p.hi), 10)
		}
		return formatFloat(min(max(v, p.min), p.max))
	default:
		if p.integer {
			return strconv.FormatInt(p.lo+rng.Int64N(p.hi-p.lo+1), 10)
		}
		return formatFloat(p.min + rng.Float64()*(p.max-p.min))
	}
}

// formatFloat writes v as the shortest decimal that reads back as v.
func formatFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// parse reads one parameter's search space.
func parse(path *field.Path, in *trainer.Parameter, grid bool) (param, field.ErrorList) {
	p := param{name: in.Name}
	sp := path.Child("searchSpace")
	ss := in.SearchSpace
	if ss == nil {
		return p, field.ErrorList{field.Required(sp, "a parameter needs a search space")}
	}
	var set []string
	if ss.Uniform != (trainer.UniformSpace{}) {
		set = append(set, "uniform")
	}
	if ss.LogUniform != (trainer.LogUniformSpace{}) {
		set = append(set, "logUniform")
	}
	if len(ss.Categorical.Choices) > 0 {
		set = append(set, "categorical")
	}
	if len(set) != 1 {
		return p, field.ErrorList{field.Invalid(sp, set, "exactly one of uniform, logUniform or categorical must be set")}
	}
	switch set[0] {
	case "categorical":
		p.kind, p.choices = categorical, ss.Categorical.Choices
		return p, nil
	case "uniform":
		p.kind = uniform
		if grid {
			return p, field.ErrorList{field.Invalid(sp.Child("uniform"), "uniform", "grid search needs every parameter to be categorical")}
		}
		return p, p.bounds(sp.Child("uniform"), ss.Uniform.Min, ss.Uniform.Max, ss.Uniform.Type)
	default:
		p.kind = logUniform
		if grid {
			return p, field.ErrorList{field.Invalid(sp.Child("logUniform"), "logUniform", "grid search needs every parameter to be categorical")}
		}
		return p, p.bounds(sp.Child("logUniform"), ss.LogUniform.Min, ss.LogUniform.Max, ss.LogUniform.Type)
	}
}

// bounds parses a numeric range into p.
func (p *param) bounds(path *field.Path, lo, hi trainer.Double, typ trainer.ParameterType) field.ErrorList {
	var errs field.ErrorList
	var err error
	if p.min, err = strconv.ParseFloat(string(lo), 64); err != nil || math.IsInf(p.min, 0) {
		errs = append(errs, field.Invalid(path.Child("min"), string(lo), "must be a finite decimal number"))
	}
	if p.max, err = strconv.ParseFloat(string(hi), 64); err != nil || math.IsInf(p.max, 0) {
		errs = append(errs, field.Invalid(path.Child("max"), string(hi), "must be a finite decimal number"))
	}
	if len(errs) > 0 {
		return errs
	}
	if p.kind == logUniform && p.min <= 0 {
		return field.ErrorList{field.Invalid(path.Child("min"), string(lo), "must be strictly greater than 0")}
	}
	if p.min >= p.max {
		return field.ErrorList{field.Invalid(path.Child("min"), string(lo), fmt.Sprintf("must be strictly less than max (%s)", hi))}
	}
	switch typ {
	case "", trainer.ParameterTypeFloat:
	case trainer.ParameterTypeInt:
		p.integer = true
		if math.Abs(p.min) > 1<<53 || math.Abs(p.max) > 1<<53 {
			return field.ErrorList{field.Invalid(path, fmt.Sprintf("[%s, %s]", lo, hi), "an Int range must lie within ±2^53")}
		}
		p.lo, p.hi = int64(math.Ceil(p.min)), int64(math.Floor(p.max))
		if p.lo > p.hi {
			return field.ErrorList{field.Invalid(path, fmt.Sprintf("[%s, %s]", lo, hi), "an Int range must hold a whole number")}
		}
	default:
		return field.ErrorList{field.NotSupported(path.Child("type"), typ, []string{string(trainer.ParameterTypeInt), string(trainer.ParameterTypeFloat)})}
	}
	return nil
}
