package controller

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// With webhooks off, bad TrainJobs on the shipped XGBoost, Flux and torchtune
// runtimes are reported in status (Created=False/BuildFailed, with the field
// and Kubeflow Trainer's message) and get no JobSet.
func TestFrameworkBadInputIsReportedInStatus(t *testing.T) {
	ns := newNamespace(t)
	for _, f := range []string{"runtimes/xgboost-distributed.yaml", "runtimes/flux-distributed.yaml", "runtimes/torchtune-llama3.2-1b.yaml"} {
		applyFile(t, ns, f)
	}
	cases := []struct {
		name, runtime string
		trainer       trainer.Trainer
		want          string
	}{
		{"xgb-reserved", "xgboost-distributed", trainer.Trainer{Env: []corev1.EnvVar{{Name: "DMLC_TASK_ID", Value: "0"}}},
			"spec.trainer.env[0]: Forbidden: DMLC_TASK_ID is reserved for the XGBoost runtime"},
		{"flux-auto", "flux-distributed", trainer.Trainer{NumProcPerNode: ptr.To(intstr.FromString("auto"))},
			`spec.trainer.numProcPerNode: Invalid value: "auto": must be an integer for Flux TrainJob`},
		{"tune-two-nodes", "torchtune-llama3.2-1b", trainer.Trainer{Command: []string{"tune", "run"}, NumNodes: ptr.To[int32](2)},
			"spec.trainer.numNodes: Invalid value: 2: must be 1 for llama3_2/1B model"},
	}
	for _, tc := range cases {
		require.NoError(t, env.Client.Create(ctx(), &trainer.TrainJob{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tc.name},
			Spec:       trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: tc.runtime}, Trainer: tc.trainer.DeepCopy()},
		}))
	}
	for _, tc := range cases {
		job := waitCondition(t, ns, tc.name, trainer.TrainJobCreated, metav1.ConditionFalse, trainer.TrainJobBuildFailedReason)
		require.Contains(t, findCond(job, trainer.TrainJobCreated).Message, tc.want, tc.name)
	}
	consistently(t, time.Second, func() error {
		for _, tc := range cases {
			if err := env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: tc.name}, &jobsetv1alpha2.JobSet{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("TrainJob %s got a JobSet (err=%v)", tc.name, err)
			}
		}
		return nil
	})
}
