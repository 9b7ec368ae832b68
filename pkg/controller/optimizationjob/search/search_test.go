package search

import (
	"math"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

func uniformP(name, lo, hi string, typ trainer.ParameterType) trainer.Parameter {
	return trainer.Parameter{Name: name, SearchSpace: &trainer.SearchSpace{Uniform: trainer.UniformSpace{Min: trainer.Double(lo), Max: trainer.Double(hi), Type: typ}}}
}

func logP(name, lo, hi string, typ trainer.ParameterType) trainer.Parameter {
	return trainer.Parameter{Name: name, SearchSpace: &trainer.SearchSpace{LogUniform: trainer.LogUniformSpace{Min: trainer.Double(lo), Max: trainer.Double(hi), Type: typ}}}
}

func catP(name string, choices ...string) trainer.Parameter {
	return trainer.Parameter{Name: name, SearchSpace: &trainer.SearchSpace{Categorical: trainer.CategoricalSpace{Choices: choices}}}
}

func randomSpec(seed *int64, n int32, params ...trainer.Parameter) *trainer.OptimizationJobSpec {
	return &trainer.OptimizationJobSpec{
		SearchAlgorithm: &trainer.SearchAlgorithm{Random: &trainer.RandomAlgorithm{Seed: seed}},
		Parameters:      params, NumTrials: n,
	}
}

func gridSpec(n int32, params ...trainer.Parameter) *trainer.OptimizationJobSpec {
	return &trainer.OptimizationJobSpec{SearchAlgorithm: &trainer.SearchAlgorithm{Grid: &trainer.GridAlgorithm{}}, Parameters: params, NumTrials: n}
}

func mustNew(t *testing.T, spec *trainer.OptimizationJobSpec, seed int64) *Search {
	t.Helper()
	s, errs := New(field.NewPath("spec"), spec, seed)
	if len(errs) > 0 {
		t.Fatalf("New: %v", errs)
	}
	return s
}

func all(s *Search) [][]trainer.ParameterAssignment {
	var out [][]trainer.ParameterAssignment
	for i := range s.Trials() {
		out = append(out, s.Trial(i))
	}
	return out
}

// TestRandomIsReproducible: the same seed gives the same trials, in any
// order of asking; another seed gives others; without a seed in the spec the
// caller's seed is used.
func TestRandomIsReproducible(t *testing.T) {
	params := []trainer.Parameter{logP("lr", "0.0001", "0.1", ""), uniformP("layers", "1", "8", trainer.ParameterTypeInt), catP("batch_size", "32", "64", "128")}
	a := all(mustNew(t, randomSpec(ptr.To[int64](42), 10, params...), 7))
	b := all(mustNew(t, randomSpec(ptr.To[int64](42), 10, params...), 99))
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("same seed, different trials (-first +second):\n%s", diff)
	}
	s := mustNew(t, randomSpec(ptr.To[int64](42), 10, params...), 7)
	if diff := cmp.Diff(a[7], s.Trial(7)); diff != "" {
		t.Errorf("trial 7 asked alone differs (-in order +alone):\n%s", diff)
	}
	if c := all(mustNew(t, randomSpec(ptr.To[int64](43), 10, params...), 7)); cmp.Equal(a, c) {
		t.Error("seeds 42 and 43 gave the same trials")
	}
	unseeded := all(mustNew(t, randomSpec(nil, 10, params...), 42))
	if diff := cmp.Diff(a, unseeded); diff != "" {
		t.Errorf("no seed in the spec: the caller's seed 42 should give seed 42's trials (-seeded +unseeded):\n%s", diff)
	}
	defaulted := all(mustNew(t, &trainer.OptimizationJobSpec{Parameters: params, NumTrials: 10}, 42))
	if diff := cmp.Diff(a, defaulted); diff != "" {
		t.Errorf("no searchAlgorithm is random search (-random +none):\n%s", diff)
	}
	for i := range a {
		for j := range i {
			if cmp.Equal(a[i], a[j]) {
				t.Errorf("trials %d and %d are the same: %v", j, i, a[i])
			}
		}
	}
}

// TestGridIsExhaustive: every combination once, the last parameter
// changing fastest, capped at numTrials.
func TestGridIsExhaustive(t *testing.T) {
	pa := func(kv ...string) []trainer.ParameterAssignment {
		var out []trainer.ParameterAssignment
		for i := 0; i < len(kv); i += 2 {
			out = append(out, trainer.ParameterAssignment{Name: kv[i], Value: kv[i+1]})
		}
		return out
	}
	params := []trainer.Parameter{catP("opt", "sgd", "adam"), catP("bs", "32", "64", "128")}
	full := [][]trainer.ParameterAssignment{
		pa("opt", "sgd", "bs", "32"), pa("opt", "sgd", "bs", "64"), pa("opt", "sgd", "bs", "128"),
		pa("opt", "adam", "bs", "32"), pa("opt", "adam", "bs", "64"), pa("opt", "adam", "bs", "128"),
	}
	cases := map[string]struct {
		spec *trainer.OptimizationJobSpec
		want [][]trainer.ParameterAssignment
	}{
		"more trials than combinations: each combination once": {gridSpec(100, params...), full},
		"exactly the combinations":                             {gridSpec(6, params...), full},
		"numTrials caps the grid":                              {gridSpec(4, params...), full[:4]},
		"one parameter":                                        {gridSpec(5, catP("x", "a", "b")), [][]trainer.ParameterAssignment{pa("x", "a"), pa("x", "b")}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := mustNew(t, tc.spec, 1)
			if diff := cmp.Diff(tc.want, all(s)); diff != "" {
				t.Errorf("trials (-want +got):\n%s", diff)
			}
		})
	}
	// 100 parameters of 100 choices: 100^100 combinations, no overflow.
	var many []trainer.ParameterAssignment
	var big []trainer.Parameter
	choices := make([]string, 100)
	for i := range choices {
		choices[i] = strconv.Itoa(i)
	}
	for i := range 100 {
		big = append(big, catP("p"+strconv.Itoa(i), choices...))
		many = append(many, trainer.ParameterAssignment{Name: "p" + strconv.Itoa(i), Value: "0"})
	}
	s := mustNew(t, gridSpec(100, big...), 1)
	many[99].Value = "99"
	if diff := cmp.Diff(many, s.Trial(99)); s.Trials() != 100 || diff != "" {
		t.Errorf("huge grid: %d trials, trial 99 (-want +got):\n%s", s.Trials(), diff)
	}
}

// TestBoundsAndTypes samples each kind of space many times: every value in
// its range and of its type; Int ranges reach both ends; log-uniform
// samples are even in log space (half below the geometric midpoint), not in
// linear space (where 1% would be).
func TestBoundsAndTypes(t *testing.T) {
	const n = 2000
	cases := map[string]struct {
		param    trainer.Parameter
		lo, hi   float64
		integer  bool
		allInts  []int64 // every whole number the range holds, each seen
		midpoint float64 // about half the samples fall below it
	}{
		"uniform float":         {param: uniformP("x", "-1.5", "2.5", ""), lo: -1.5, hi: 2.5, midpoint: 0.5},
		"uniform int":           {param: uniformP("x", "1", "4", trainer.ParameterTypeInt), lo: 1, hi: 4, integer: true, allInts: []int64{1, 2, 3, 4}},
		"uniform int, fraction": {param: uniformP("x", "0.5", "3.7", trainer.ParameterTypeInt), lo: 1, hi: 3, integer: true, allInts: []int64{1, 2, 3}},
		"log-uniform float":     {param: logP("lr", "0.00001", "0.1", ""), lo: 1e-5, hi: 0.1, midpoint: 1e-3},
		"log-uniform int":       {param: logP("units", "1", "1000", trainer.ParameterTypeInt), lo: 1, hi: 1000, integer: true, midpoint: 31.6},
		"log-uniform exponent":  {param: logP("wd", "1e-6", "1e-2", trainer.ParameterTypeFloat), lo: 1e-6, hi: 1e-2, midpoint: 1e-4},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := mustNew(t, randomSpec(ptr.To[int64](5), 100, tc.param), 0)
			seen := map[int64]bool{}
			below := 0
			for i := range n {
				v := s.Trial(i)[0].Value
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatalf("trial %d: %q is not a number", i, v)
				}
				if f < tc.lo || f > tc.hi {
					t.Fatalf("trial %d: %s out of [%g, %g]", i, v, tc.lo, tc.hi)
				}
				if tc.integer {
					k, err := strconv.ParseInt(v, 10, 64)
					if err != nil {
						t.Fatalf("trial %d: Int parameter %q is not a whole number", i, v)
					}
					seen[k] = true
				}
				if f < tc.midpoint {
					below++
				}
			}
			for _, k := range tc.allInts {
				if !seen[k] {
					t.Errorf("%d never sampled in %d trials (seen %v)", k, n, seen)
				}
			}
			if tc.midpoint != 0 {
				if frac := float64(below) / n; math.Abs(frac-0.5) > 0.05 {
					t.Errorf("%.1f%% of samples below %g, want about 50%%", 100*frac, tc.midpoint)
				}
			}
		})
	}
	s := mustNew(t, randomSpec(ptr.To[int64](1), 100, catP("c", "a", "b", "c")), 0)
	seen := map[string]int{}
	for i := range 300 {
		seen[s.Trial(i)[0].Value]++
	}
	if len(seen) != 3 {
		t.Errorf("categorical: seen %v, want a, b and c", seen)
	}
}

// TestInvalid: what the schema lets through but cannot be searched is an
// error at its field path.
func TestInvalid(t *testing.T) {
	cases := map[string]struct {
		spec *trainer.OptimizationJobSpec
		want []string
	}{
		"min not below max":                {randomSpec(nil, 1, uniformP("x", "2", "1", "")), []string{"spec.parameters[0].searchSpace.uniform.min"}},
		"log min zero":                     {randomSpec(nil, 1, catP("a", "x"), logP("lr", "0", "1", "")), []string{"spec.parameters[1].searchSpace.logUniform.min"}},
		"not a number":                     {randomSpec(nil, 1, uniformP("x", "abc", "1e400", "")), []string{"spec.parameters[0].searchSpace.uniform.min", "spec.parameters[0].searchSpace.uniform.max"}},
		"int range without a whole number": {randomSpec(nil, 1, uniformP("x", "0.2", "0.8", trainer.ParameterTypeInt)), []string{"spec.parameters[0].searchSpace.uniform"}},
		"grid on a numeric parameter":      {gridSpec(2, catP("a", "x"), uniformP("x", "0", "1", "")), []string{"spec.parameters[1].searchSpace.uniform"}},
		"no search space":                  {randomSpec(nil, 1, trainer.Parameter{Name: "x"}), []string{"spec.parameters[0].searchSpace"}},
		"two search spaces": {randomSpec(nil, 1, trainer.Parameter{Name: "x", SearchSpace: &trainer.SearchSpace{
			Uniform: trainer.UniformSpace{Min: "0", Max: "1"}, Categorical: trainer.CategoricalSpace{Choices: []string{"a"}},
		}}), []string{"spec.parameters[0].searchSpace"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, errs := New(field.NewPath("spec"), tc.spec, 0)
			var got []string
			for _, e := range errs {
				got = append(got, e.Field)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("error paths (-want +got):\n%s\nerrors: %v", diff, errs)
			}
		})
	}
}
