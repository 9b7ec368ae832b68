package plainml_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
	"github.com/trainyard/trainyard/pkg/runtime/plugins"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/plainml"
	rtt "github.com/trainyard/trainyard/pkg/runtime/testing"
)

func TestValidate(t *testing.T) {
	cases := map[string]struct {
		policy *trainer.MLPolicy
		// wantPolicy is the policy named in the message ("" for no error).
		wantPolicy string
	}{
		"no mlPolicy":                 {},
		"mlPolicy with only numNodes": {policy: &trainer.MLPolicy{NumNodes: new(int32)}},
		"torch":                       {policy: &trainer.MLPolicy{MLPolicySource: trainer.MLPolicySource{Torch: &trainer.TorchMLPolicySource{}}}},
		"mpi":                         {policy: &trainer.MLPolicy{MLPolicySource: trainer.MLPolicySource{MPI: &trainer.MPIMLPolicySource{}}}, wantPolicy: "mpi"},
		"jax":                         {policy: &trainer.MLPolicy{MLPolicySource: trainer.MLPolicySource{JAX: &trainer.JAXMLPolicySource{}}}, wantPolicy: "jax"},
		"xgboost":                     {policy: &trainer.MLPolicy{MLPolicySource: trainer.MLPolicySource{XGBoost: &trainer.XGBoostMLPolicySource{}}}, wantPolicy: "xgboost"},
		"flux":                        {policy: &trainer.MLPolicy{MLPolicySource: trainer.MLPolicySource{Flux: &trainer.FluxMLPolicySource{}}}, wantPolicy: "flux"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := rtt.MakeRuntime(trainer.ClusterTrainingRuntimeKind, "rt-"+name)
			if tc.policy != nil {
				w.MLPolicy(tc.policy)
			}
			rt := w.Obj()
			job := rtt.MakeTrainJob("ns", "job").Obj()
			info, err := runtime.NewInfo(job, rt)
			if err != nil {
				t.Fatalf("NewInfo: %v", err)
			}
			errs := plainml.New().Validate(info, nil, job)
			if tc.wantPolicy == "" {
				if len(errs) != 0 {
					t.Errorf("Validate = %v, want no error", errs)
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
				"supported: torch",
			} {
				if !strings.Contains(errs[0].Detail, s) {
					t.Errorf("message %q does not mention %q", errs[0].Detail, s)
				}
			}
			if errs[0].BadValue != rt.Name {
				t.Errorf("bad value = %v, want the runtime name %q", errs[0].BadValue, rt.Name)
			}

			// Through the pipeline it is an InvalidError, and nothing is built.
			fw, err := plugins.NewFramework()
			if err != nil {
				t.Fatal(err)
			}
			objs, err := fw.Build(job, rt)
			if !framework.IsInvalid(err) || objs != nil {
				t.Errorf("Build = %v, %v; want no objects and an InvalidError", objs, err)
			}
			if err != nil && !strings.Contains(err.Error(), "mlPolicy."+tc.wantPolicy) {
				t.Errorf("Build error %q does not name the policy", err)
			}
		})
	}
}

func TestName(t *testing.T) {
	if got := plainml.New().Name(); got != "PlainML" {
		t.Errorf("Name() = %q, want PlainML", got)
	}
}
