package framework_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/observe"
	"github.com/trainyard/trainyard/pkg/plan"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
	"github.com/trainyard/trainyard/pkg/runtime/plugins"
	rtt "github.com/trainyard/trainyard/test/util/rtt"
)

// ---------------------------------------------------------------------------
// Fake plugins that record their calls.

type recorder struct{ calls []string }

func (r *recorder) record(name, point string) {
	if r != nil {
		r.calls = append(r.calls, name+"."+point)
	}
}

type fake struct {
	name string
	rec  *recorder
	// errs is returned by Validate; err by the other extension points.
	errs field.ErrorList
	err  error
}

func (f *fake) Name() string { return f.name }

type nameOnly struct{ fake }

type validateP struct{ fake }

func (p *validateP) Validate(_ *runtime.Info, _ *runtime.Request) field.ErrorList {
	p.rec.record(p.name, "Validate")
	return p.errs
}

type mlP struct{ fake }

func (p *mlP) EnforceMLPolicy(info *runtime.Info, _ *runtime.Request) error {
	p.rec.record(p.name, "EnforceMLPolicy")
	if info.Labels == nil {
		info.Labels = map[string]string{}
	}
	info.Labels["seen-by-"+p.name] = "ml"
	return p.err
}

type podGroupP struct{ fake }

func (p *podGroupP) EnforcePodGroupPolicy(_ *runtime.Info, _ *runtime.Request) error {
	p.rec.record(p.name, "EnforcePodGroupPolicy")
	return p.err
}

type buildP struct{ fake }

func (p *buildP) Build(info *runtime.Info, _ *runtime.Request) ([]plan.Child, error) {
	p.rec.record(p.name, "Build")
	if p.err != nil {
		return nil, p.err
	}
	return []plan.Child{plan.Apply(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: p.name, Labels: info.Labels}})}, nil
}

type statusP struct{ fake }

func (p *statusP) Status(_ string, _ *observe.Observed, facts *framework.Facts) {
	p.rec.record(p.name, "Status")
	facts.Gang = &framework.Waiting{Reason: p.name}
}

// allP implements every extension point.
type allP struct{ fake }

func (p *allP) Validate(_ *runtime.Info, _ *runtime.Request) field.ErrorList {
	p.rec.record(p.name, "Validate")
	return p.errs
}

func (p *allP) EnforceMLPolicy(_ *runtime.Info, _ *runtime.Request) error {
	p.rec.record(p.name, "EnforceMLPolicy")
	return p.err
}

func (p *allP) EnforcePodGroupPolicy(_ *runtime.Info, _ *runtime.Request) error {
	p.rec.record(p.name, "EnforcePodGroupPolicy")
	return p.err
}

func (p *allP) Build(_ *runtime.Info, _ *runtime.Request) ([]plan.Child, error) {
	p.rec.record(p.name, "Build")
	return []plan.Child{plan.Apply(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: p.name}})}, p.err
}

func (p *allP) Status(_ string, _ *observe.Observed, facts *framework.Facts) {
	p.rec.record(p.name, "Status")
	facts.Gang = &framework.Waiting{Reason: p.name}
}

func f(name string, rec *recorder) fake { return fake{name: name, rec: rec} }

// ---------------------------------------------------------------------------

func TestNew(t *testing.T) {
	cases := map[string]struct {
		plugins   []framework.Plugin
		wantNames []string
		// wantErr are substrings of the error ("" entries mean no error).
		wantErr []string
	}{
		"no plugins": {},
		"one plugin per extension point": {
			plugins:   []framework.Plugin{&validateP{f("v", nil)}, &mlP{f("m", nil)}, &podGroupP{f("p", nil)}, &buildP{f("b", nil)}, &statusP{f("s", nil)}},
			wantNames: []string{"v", "m", "p", "b", "s"},
		},
		"a plugin on every extension point": {
			plugins:   []framework.Plugin{&allP{f("all", nil)}, &validateP{f("v", nil)}},
			wantNames: []string{"all", "v"},
		},
		"the real plugins": {
			plugins:   plugins.Ordered(plugins.Options{}),
			wantNames: []string{"Resources", "Initializer", "Torch", "MPI", "JAX", "XGBoost", "Flux", "TrainJobStatus", "Kueue", "CoScheduling", "Volcano", "JobSet"},
		},
		"duplicate names": {
			plugins: []framework.Plugin{&validateP{f("x", nil)}, &mlP{f("y", nil)}, &buildP{f("x", nil)}},
			wantErr: []string{`"x"`, "duplicate plugin name"},
		},
		"duplicate names of the same type": {
			plugins: []framework.Plugin{&validateP{f("x", nil)}, &validateP{f("x", nil)}},
			wantErr: []string{`"x"`, "duplicate plugin name"},
		},
		"unnamed plugin": {
			plugins: []framework.Plugin{&validateP{f("v", nil)}, &mlP{f("", nil)}},
			wantErr: []string{"mlP", "empty name"},
		},
		"plugin with no extension point": {
			plugins: []framework.Plugin{&validateP{f("v", nil)}, &nameOnly{f("lazy", nil)}},
			wantErr: []string{`"lazy"`, "no extension point"},
		},
		// Status is one more extension point: each status plugin fills its
		// part (the JobSet's counts, later a PodGroup's state), in order.
		"two status plugins": {
			plugins:   []framework.Plugin{&statusP{f("s1", nil)}, &validateP{f("v", nil)}, &statusP{f("s2", nil)}},
			wantNames: []string{"s1", "v", "s2"},
		},
		"a status plugin and an all-points plugin": {
			plugins:   []framework.Plugin{&allP{f("all", nil)}, &statusP{f("s", nil)}},
			wantNames: []string{"all", "s"},
		},
		"the real plugins twice": {
			plugins: append(plugins.Ordered(plugins.Options{}), plugins.Ordered(plugins.Options{})...),
			wantErr: []string{`"Resources"`, "duplicate plugin name"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fw, err := framework.New(tc.plugins...)
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("New succeeded with %v, want an error", fw.Names())
				}
				for _, s := range tc.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not contain %q", err, s)
					}
				}
				if fw != nil {
					t.Errorf("New returned a framework with an error")
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if diff := cmp.Diff(tc.wantNames, fw.Names()); diff != "" {
				t.Errorf("Names (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNamesIsACopy(t *testing.T) {
	fw, err := plugins.NewFramework()
	if err != nil {
		t.Fatal(err)
	}
	names := fw.Names()
	names[0] = "changed"
	if got := fw.Names()[0]; got != "Resources" {
		t.Errorf("Names()[0] = %q after changing a returned slice, want Resources", got)
	}
}

// Every extension point runs its plugins in the order given to New, and the
// points run in pipeline order: Validate, MLPolicy, PodGroupPolicy, Build.
func TestExtensionPointOrder(t *testing.T) {
	rec := &recorder{}
	fw, err := framework.New(
		&mlP{f("m1", rec)},
		&allP{f("all", rec)},
		&buildP{f("b1", rec)},
		&validateP{f("v1", rec)},
		&podGroupP{f("p1", rec)},
		&mlP{f("m2", rec)},
		&buildP{f("b2", rec)},
	)
	if err != nil {
		t.Fatal(err)
	}
	job := rtt.MakeTrainJob("ns", "job").Obj()
	rt := rtt.MakeRuntime(trainer.ClusterTrainingRuntimeKind, "plain").Obj()
	built, err := fw.Build(runtime.TrainJobRequest(job), rt)
	objs := built.Objects()
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	wantCalls := []string{
		"all.Validate", "v1.Validate",
		"m1.EnforceMLPolicy", "all.EnforceMLPolicy", "m2.EnforceMLPolicy",
		"all.EnforcePodGroupPolicy", "p1.EnforcePodGroupPolicy",
		"all.Build", "b1.Build", "b2.Build",
	}
	if diff := cmp.Diff(wantCalls, rec.calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	var gotObjs []string
	for _, o := range objs {
		gotObjs = append(gotObjs, o.GetName())
	}
	if diff := cmp.Diff([]string{"all", "b1", "b2"}, gotObjs); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
	// Build plugins see what the MLPolicy plugins did to the same Info.
	wantLabels := map[string]string{"seen-by-m1": "ml", "seen-by-m2": "ml"}
	if diff := cmp.Diff(wantLabels, objs[1].GetLabels()); diff != "" {
		t.Errorf("labels seen by b1 (-want +got):\n%s", diff)
	}

	rec.calls = nil
	facts := fw.Status(job.Name, nil)
	if diff := cmp.Diff([]string{"all.Status"}, rec.calls); diff != "" {
		t.Errorf("Status calls (-want +got):\n%s", diff)
	}
	if facts.Gang == nil || facts.Gang.Reason != "all" {
		t.Errorf("facts = %+v, want the status plugin's mark", facts)
	}

	rec.calls = nil
	if errs := fw.Validate(rt, runtime.TrainJobRequest(job)); len(errs) != 0 {
		t.Errorf("Validate = %v", errs)
	}
	if diff := cmp.Diff([]string{"all.Validate", "v1.Validate"}, rec.calls); diff != "" {
		t.Errorf("Validate calls (-want +got):\n%s", diff)
	}
}

func TestStatusWithoutStatusPlugin(t *testing.T) {
	fw, err := framework.New(&validateP{f("v", nil)})
	if err != nil {
		t.Fatal(err)
	}
	facts := fw.Status("job", rtt.ObservedJobSet(&jobsetv1alpha2.JobSet{}))
	if diff := cmp.Diff(framework.Facts{}, facts); diff != "" {
		t.Errorf("facts without a status plugin (-want +got):\n%s", diff)
	}
}

var errBoom = errors.New("boom")

func TestBuildErrors(t *testing.T) {
	fieldErr := field.Invalid(field.NewPath("spec", "trainer", "numNodes"), 0, "must be at least 1")
	type pluginsFn func(rec *recorder) []framework.Plugin
	cases := map[string]struct {
		plugins pluginsFn
		job     *trainer.TrainJob
		// wantErrs are the field errors of an InvalidError; nil for another error.
		wantErrs    []rtt.FieldErr
		wantInvalid bool
		wantIs      error
		wantMsg     []string
		wantCalls   []string
	}{
		"validation errors of all validate plugins, then stop": {
			plugins: func(rec *recorder) []framework.Plugin {
				return []framework.Plugin{
					&validateP{fake{name: "v1", rec: rec, errs: field.ErrorList{fieldErr}}},
					&validateP{fake{name: "v2", rec: rec, errs: field.ErrorList{field.Required(field.NewPath("spec", "runtimeRef", "name"), "")}}},
					&mlP{f("m", rec)},
					&buildP{f("b", rec)},
				}
			},
			wantErrs: []rtt.FieldErr{
				{Type: field.ErrorTypeInvalid, Field: "spec.trainer.numNodes"},
				{Type: field.ErrorTypeRequired, Field: "spec.runtimeRef.name"},
			},
			wantInvalid: true,
			wantMsg:     []string{"spec.trainer.numNodes", "spec.runtimeRef.name"},
			wantCalls:   []string{"v1.Validate", "v2.Validate"},
		},
		"an MLPolicy field error": {
			plugins: func(rec *recorder) []framework.Plugin {
				return []framework.Plugin{
					&mlP{fake{name: "m1", rec: rec, err: fieldErr}},
					&mlP{f("m2", rec)},
					&buildP{f("b", rec)},
				}
			},
			wantErrs:    []rtt.FieldErr{{Type: field.ErrorTypeInvalid, Field: "spec.trainer.numNodes"}},
			wantInvalid: true,
			wantCalls:   []string{"m1.EnforceMLPolicy"},
		},
		"a wrapped field error is still invalid": {
			plugins: func(rec *recorder) []framework.Plugin {
				return []framework.Plugin{&mlP{fake{name: "m", rec: rec, err: fmt.Errorf("resolving: %w", fieldErr)}}}
			},
			wantErrs:    []rtt.FieldErr{{Type: field.ErrorTypeInvalid, Field: "spec.trainer.numNodes"}},
			wantInvalid: true,
			wantCalls:   []string{"m.EnforceMLPolicy"},
		},
		"a PodGroupPolicy field error": {
			plugins: func(rec *recorder) []framework.Plugin {
				return []framework.Plugin{&podGroupP{fake{name: "p", rec: rec, err: fieldErr}}, &buildP{f("b", rec)}}
			},
			wantErrs:    []rtt.FieldErr{{Type: field.ErrorTypeInvalid, Field: "spec.trainer.numNodes"}},
			wantInvalid: true,
			wantCalls:   []string{"p.EnforcePodGroupPolicy"},
		},
		"a Build field error": {
			plugins: func(rec *recorder) []framework.Plugin {
				return []framework.Plugin{&buildP{fake{name: "b1", rec: rec, err: fieldErr}}, &buildP{f("b2", rec)}}
			},
			wantErrs:    []rtt.FieldErr{{Type: field.ErrorTypeInvalid, Field: "spec.trainer.numNodes"}},
			wantInvalid: true,
			wantCalls:   []string{"b1.Build"},
		},
		"another MLPolicy error is not invalid and names the plugin": {
			plugins: func(rec *recorder) []framework.Plugin {
				return []framework.Plugin{&mlP{fake{name: "m", rec: rec, err: errBoom}}, &buildP{f("b", rec)}}
			},
			wantIs:    errBoom,
			wantMsg:   []string{"plugin m", "boom"},
			wantCalls: []string{"m.EnforceMLPolicy"},
		},
		"another Build error is not invalid and names the plugin": {
			plugins: func(rec *recorder) []framework.Plugin {
				return []framework.Plugin{&buildP{f("b1", rec)}, &buildP{fake{name: "b2", rec: rec, err: errBoom}}}
			},
			wantIs:    errBoom,
			wantMsg:   []string{"plugin b2", "boom"},
			wantCalls: []string{"b1.Build", "b2.Build"},
		},
		"another PodGroupPolicy error is not invalid": {
			plugins: func(rec *recorder) []framework.Plugin {
				return []framework.Plugin{&podGroupP{fake{name: "p", rec: rec, err: errBoom}}}
			},
			wantIs:    errBoom,
			wantMsg:   []string{"plugin p", "boom"},
			wantCalls: []string{"p.EnforcePodGroupPolicy"},
		},
		"a TrainJob the Info cannot be built from: no plugin runs": {
			plugins: func(rec *recorder) []framework.Plugin {
				return []framework.Plugin{&validateP{f("v", rec)}, &buildP{f("b", rec)}}
			},
			job: rtt.MakeTrainJob("ns", "job").PodTemplateOverride(trainer.PodTemplateOverride{
				TargetJobs: []trainer.PodTemplateOverrideTargetJob{{Name: "launcher"}}}).Obj(),
			wantErrs:    []rtt.FieldErr{{Type: field.ErrorTypeNotFound, Field: "spec.podTemplateOverrides[0].targetJobs[0].name"}},
			wantInvalid: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rec := &recorder{}
			fw, err := framework.New(tc.plugins(rec)...)
			if err != nil {
				t.Fatal(err)
			}
			job := tc.job
			if job == nil {
				job = rtt.MakeTrainJob("ns", "job").Obj()
			}
			built, err := fw.Build(runtime.TrainJobRequest(job), rtt.MakeRuntime(trainer.ClusterTrainingRuntimeKind, "plain").Obj())
			objs := built.Objects()
			if err == nil {
				t.Fatalf("Build succeeded with %d objects, want an error", len(objs))
			}
			if objs != nil {
				t.Errorf("Build returned objects with an error: %v", objs)
			}
			if got := framework.IsInvalid(err); got != tc.wantInvalid {
				t.Errorf("IsInvalid(%v) = %v, want %v", err, got, tc.wantInvalid)
			}
			if tc.wantInvalid {
				var ie *framework.InvalidError
				if !errors.As(err, &ie) {
					t.Fatalf("error %T is not an *InvalidError", err)
				}
				if diff := cmp.Diff(tc.wantErrs, rtt.FieldErrs(ie.Errs)); diff != "" {
					t.Errorf("field errors (-want +got):\n%s", diff)
				}
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("errors.Is(%v, %v) = false", err, tc.wantIs)
			}
			for _, s := range tc.wantMsg {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
			if diff := cmp.Diff(tc.wantCalls, rec.calls); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
		})
	}
}

func TestIsInvalid(t *testing.T) {
	invalid := &framework.InvalidError{Errs: field.ErrorList{field.Invalid(field.NewPath("spec"), "", "bad")}}
	cases := map[string]struct {
		err  error
		want bool
	}{
		"nil":                           {err: nil, want: false},
		"plain error":                   {err: errBoom, want: false},
		"a bare field error":            {err: field.Invalid(field.NewPath("spec"), "", "bad"), want: false},
		"InvalidError":                  {err: invalid, want: true},
		"wrapped InvalidError":          {err: fmt.Errorf("rendering: %w", invalid), want: true},
		"twice wrapped InvalidError":    {err: fmt.Errorf("a: %w", fmt.Errorf("b: %w", invalid)), want: true},
		"joined with an InvalidError":   {err: errors.Join(errBoom, invalid), want: true},
		"message mentions invalid only": {err: errors.New("invalid"), want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := framework.IsInvalid(tc.err); got != tc.want {
				t.Errorf("IsInvalid = %v, want %v", got, tc.want)
			}
		})
	}
	if got := invalid.Error(); !strings.Contains(got, "spec: Invalid value") || !strings.Contains(got, "bad") {
		t.Errorf("InvalidError.Error() = %q", got)
	}
}

// Validate is the admission-time view of the same checks Build makes.
func TestValidateWithRealPlugins(t *testing.T) {
	fw, err := plugins.NewFramework()
	if err != nil {
		t.Fatal(err)
	}
	rt := rtt.MustTorchDistributedRuntime()
	cases := map[string]struct {
		job  *trainer.TrainJob
		rt   *runtime.Runtime
		want []rtt.FieldErr
	}{
		"valid": {
			job: rtt.MakeTrainJob("ns", "job").NumNodes(2).Env(rtt.Env("PET_REDIRECTS", "3")).Obj(),
		},
		"errors of several plugins, in plugin order": {
			job: rtt.MakeTrainJob("ns", "job").NumNodes(-1).Env(rtt.Env("WORLD_SIZE", "2")).
				ResourcesPerNode(corev1.ResourceRequirements{Requests: rtt.ResourceList("cpu", "2"), Limits: rtt.ResourceList("cpu", "1")}).Obj(),
			want: []rtt.FieldErr{
				{Type: field.ErrorTypeInvalid, Field: "spec.trainer.resourcesPerNode.requests[cpu]"},
				{Type: field.ErrorTypeInvalid, Field: "spec.trainer.env[0].name"},
				{Type: field.ErrorTypeInvalid, Field: "spec.trainer.numNodes"},
			},
		},
		"an override of an unknown job": {
			job: rtt.MakeTrainJob("ns", "job").PodTemplateOverride(trainer.PodTemplateOverride{
				TargetJobs: []trainer.PodTemplateOverrideTargetJob{{Name: "launcher"}}}).Obj(),
			want: []rtt.FieldErr{{Type: field.ErrorTypeNotFound, Field: "spec.podTemplateOverrides[0].targetJobs[0].name"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := tc.rt
			if r == nil {
				r = rt
			}
			got := fw.Validate(r, runtime.TrainJobRequest(tc.job))
			if diff := cmp.Diff(tc.want, rtt.FieldErrs(got)); diff != "" {
				t.Errorf("Validate (-want +got):\n%s", diff)
			}
		})
	}
}
