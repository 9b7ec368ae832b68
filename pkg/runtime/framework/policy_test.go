package framework_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
	"github.com/trainyard/trainyard/pkg/runtime/plugins"
	rtt "github.com/trainyard/trainyard/test/util/rtt"
)

// A runtime whose ML policy no plugin claims is rejected with the runtime
// named; one with no framework policy, or one a plugin claims, is not. (The
// rule once lived in a PlainML plugin with a hand-kept list; the plugins now
// claim what they run.)
func TestUnclaimedPolicies(t *testing.T) {
	cases := map[string]struct {
		policy *trainer.MLPolicy
		// withoutPlugin names a plugin left out of the framework.
		withoutPlugin string
		// wantPolicy is the policy named in the message ("" for no error).
		wantPolicy string
	}{
		"no mlPolicy":                 {},
		"mlPolicy with only numNodes": {policy: &trainer.MLPolicy{NumNodes: new(int32)}},
		"torch":                       {policy: &trainer.MLPolicy{MLPolicySource: trainer.MLPolicySource{Torch: &trainer.TorchMLPolicySource{}}}},
		"mpi":                         {policy: &trainer.MLPolicy{MLPolicySource: trainer.MLPolicySource{MPI: &trainer.MPIMLPolicySource{}}}},
		"jax":                         {policy: &trainer.MLPolicy{MLPolicySource: trainer.MLPolicySource{JAX: &trainer.JAXMLPolicySource{}}}},
		"xgboost":                     {policy: &trainer.MLPolicy{MLPolicySource: trainer.MLPolicySource{XGBoost: &trainer.XGBoostMLPolicySource{}}}},
		"flux":                        {policy: &trainer.MLPolicy{MLPolicySource: trainer.MLPolicySource{Flux: &trainer.FluxMLPolicySource{}}}},
		// Every policy has its plugin now; a framework without the MPI
		// plugin shows what happens to a policy nobody claims.
		"mpi without its plugin": {policy: &trainer.MLPolicy{MLPolicySource: trainer.MLPolicySource{MPI: &trainer.MPIMLPolicySource{}}},
			withoutPlugin: "MPI", wantPolicy: "mpi"},
	}
	all, err := plugins.NewFramework()
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fw := all
			if tc.withoutPlugin != "" {
				var ps []framework.Plugin
				for _, p := range plugins.Ordered(plugins.Options{}) {
					if p.Name() != tc.withoutPlugin {
						ps = append(ps, p)
					}
				}
				if fw, err = framework.New(ps...); err != nil {
					t.Fatal(err)
				}
			}
			w := rtt.MakeRuntime(trainer.ClusterTrainingRuntimeKind, "rt-"+name)
			if tc.policy != nil {
				w.MLPolicy(tc.policy)
			}
			rt := w.Obj()
			job := rtt.MakeTrainJob("ns", "job").Obj()
			var errs field.ErrorList
			for _, e := range fw.Validate(rt, runtime.TrainJobRequest(job)) {
				if e.Field == "spec.runtimeRef" {
					errs = append(errs, e)
				}
			}
			warnings := fw.RuntimeWarnings(&rt.Spec)
			if tc.wantPolicy == "" {
				if len(errs) != 0 || len(warnings) != 0 {
					t.Errorf("Validate = %v, warnings %q; want neither", errs, warnings)
				}
				return
			}
			want := []rtt.FieldErr{{Type: field.ErrorTypeInvalid, Field: "spec.runtimeRef"}}
			if diff := cmp.Diff(want, rtt.FieldErrs(errs)); diff != "" {
				t.Fatalf("Validate (-want +got):\n%s", diff)
			}
			for _, s := range []string{
				"mlPolicy." + tc.wantPolicy,
				"does not run yet",
				"ClusterTrainingRuntime",
				rt.Name,
				"supported: " + strings.Join(fw.ClaimedPolicies(), ", ") + ", or no framework policy",
			} {
				if !strings.Contains(errs[0].Detail, s) {
					t.Errorf("message %q does not mention %q", errs[0].Detail, s)
				}
			}
			if errs[0].BadValue != rt.Name {
				t.Errorf("bad value = %v, want the runtime name %q", errs[0].BadValue, rt.Name)
			}
			if len(warnings) != 1 || !strings.Contains(warnings[0], "spec.mlPolicy."+tc.wantPolicy) {
				t.Errorf("runtime warnings = %q, want one naming spec.mlPolicy.%s", warnings, tc.wantPolicy)
			}

			// Through the pipeline it is an InvalidError, and nothing is built.
			built, err := fw.Build(runtime.TrainJobRequest(job), rt)
			if !framework.IsInvalid(err) || built != nil {
				t.Errorf("Build = %v, %v; want no plan and an InvalidError", built, err)
			}
			if err != nil && !strings.Contains(err.Error(), "mlPolicy."+tc.wantPolicy) {
				t.Errorf("Build error %q does not name the policy", err)
			}
		})
	}
	if diff := cmp.Diff([]string{"flux", "jax", "mpi", "torch", "xgboost"}, all.ClaimedPolicies()); diff != "" {
		t.Errorf("ClaimedPolicies (-want +got):\n%s", diff)
	}
}
