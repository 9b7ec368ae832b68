package validation_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/validation"
	rtt "github.com/trainyard/trainyard/test/util/rtt"
)

// volcanoRuntime is a torch runtime with a side job and a trainer, under
// Volcano when policy is non-nil, whose pods take the priority classes given
// by replicated job.
func volcanoRuntime(policy *trainer.VolcanoPodGroupPolicySource, priority map[string]string) *runtime.Runtime {
	return rtt.MakeTorchRuntime("torch").ReplicatedJobs(
		rtt.MakeReplicatedJob("side", "", rtt.MakeContainer("side", "side:latest")),
		rtt.MakeReplicatedJob("node", trainer.AncestorTrainer, rtt.MakeContainer(trainer.NodeContainer, "trainer:latest")),
	).PriorityClasses(priority).Volcano(policy).Obj()
}

func TestValidateLookupsPriorityClass(t *testing.T) {
	existing := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000}
	volcano := &trainer.VolcanoPodGroupPolicySource{}
	unreadable := interceptor.Funcs{Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
		return errors.New("connection refused")
	}}
	cases := map[string]struct {
		priority map[string]string
		policy   *trainer.VolcanoPodGroupPolicySource
		reads    *interceptor.Funcs
		want     []rtt.FieldErrDetail
	}{
		"no priority class":                      {policy: volcano},
		"an existing priority class":             {policy: volcano, priority: map[string]string{"node": "high"}},
		"a system priority class ends the check": {policy: volcano, priority: map[string]string{"node": "system-node-critical"}},
		"a missing priority class": {
			policy: volcano, priority: map[string]string{"node": "urgent"},
			want: []rtt.FieldErrDetail{{Field: "spec.templateSpec.priorityClassName", Type: field.ErrorTypeInvalid,
				Detail: `PriorityClass "urgent" doesn't exist: priorityclasses.scheduling.k8s.io "urgent" not found`}},
		},
		"the last job's class is the one checked":                          {policy: volcano, priority: map[string]string{"side": "urgent", "node": "high"}},
		"a missing priority class without a Volcano policy is not checked": {priority: map[string]string{"node": "urgent"}},
		"a failed lookup": {
			policy: volcano, priority: map[string]string{"node": "high"}, reads: &unreadable,
			want: []rtt.FieldErrDetail{{Field: "spec.templateSpec.priorityClassName", Type: field.ErrorTypeInternal,
				Detail: `looking up PriorityClass "high": connection refused`}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(existing)
			if tc.reads != nil {
				b = b.WithInterceptorFuncs(*tc.reads)
			}
			errs := validation.ValidateLookups(context.Background(), b.Build(), runtime.TrainJobRequest(rtt.MakeTrainJob("ns", "job").Obj()), volcanoRuntime(tc.policy, tc.priority))
			if diff := cmp.Diff(tc.want, rtt.FieldErrDetails(errs)); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}
