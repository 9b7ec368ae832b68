// Package v1kinds tests the MPIJob and XGBoostJob controllers against a real
// kube-apiserver and etcd (test/integration/framework), with the CRDs of
// manifests/base/crds and no webhooks (so bad input must show in status).
// Neither the JobSet nor the Job controller runs: tests create the pods the
// Job controller would, and write JobSet and pod status by hand.
package v1kinds

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/controller"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
	"github.com/trainyard/trainyard/pkg/controller/mpijob"
	"github.com/trainyard/trainyard/pkg/controller/xgboostjob"
	"github.com/trainyard/trainyard/test/integration/framework"
)

var (
	env    *framework.Env
	c      client.Client
	scheme *k8sruntime.Scheme
)

func TestMain(m *testing.M) {
	framework.Main(m, &env, framework.Options{}, func(*framework.Env) (func(), error) { return startManager() })
}

// startManager runs a manager with the production cache settings and the
// MPIJob and XGBoostJob kinds, as the manager sets them up.
func startManager() (func(), error) {
	scheme = framework.Scheme()
	var err error
	if c, err = client.New(env.Config, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	cacheOpts, err := controller.CacheOptions(env.Config, scheme)
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(env.Config, framework.TestManagerOptions(ctrl.Options{Scheme: scheme, Cache: cacheOpts}))
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	m := jobframework.NewManager(mgr, nil)
	for _, k := range []jobframework.Kind{mpijob.NewKind(), xgboostjob.NewKind()} {
		if err := k.Validate(); err != nil {
			return nil, err
		}
		if err := k.SetupWithManager(m); err != nil {
			return nil, err
		}
	}
	return framework.RunManager(mgr, "manager"), nil
}

func ctx() context.Context { return context.Background() }

func eventually(t *testing.T, fn func() error) { t.Helper(); framework.Eventually(t, fn) }

// waitCondition waits for a condition of this type, status and reason on a v1 job.
func waitCondition(t *testing.T, job client.Object, status func() *kubeflowv1.JobStatus, ct kubeflowv1.JobConditionType, reason string) {
	t.Helper()
	eventually(t, func() error {
		if err := c.Get(ctx(), client.ObjectKeyFromObject(job), job); err != nil {
			return err
		}
		for _, cond := range status().Conditions {
			if cond.Type == ct && cond.Status == corev1.ConditionTrue && cond.Reason == reason {
				return nil
			}
		}
		return fmt.Errorf("no %s=True/%s: %+v", ct, reason, status().Conditions)
	})
}

func waitJobSet(t *testing.T, ns, name string) *jobsetv1alpha2.JobSet {
	t.Helper()
	var js jobsetv1alpha2.JobSet
	eventually(t, func() error { return c.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, &js) })
	return &js
}

// runPod creates the pod of a replicated job (as the Job controller would)
// in the given phase.
func runPod(t *testing.T, js *jobsetv1alpha2.JobSet, rjob string, phase corev1.PodPhase) {
	t.Helper()
	var tmpl *corev1.PodTemplateSpec
	for _, rj := range js.Spec.ReplicatedJobs {
		if rj.Name == rjob {
			tmpl = rj.Template.Spec.Template.DeepCopy()
		}
	}
	require.NotNil(t, tmpl, "replicated job %s", rjob)
	for k, v := range map[string]string{jobsetv1alpha2.JobSetNameKey: js.Name, jobsetv1alpha2.JobSetUIDKey: string(js.UID), jobsetv1alpha2.ReplicatedJobNameKey: rjob} {
		tmpl.Labels[k] = v
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: js.Namespace, Name: js.Name + "-" + rjob + "-0-abcde", Labels: tmpl.Labels}, Spec: tmpl.Spec}
	require.NoError(t, c.Create(ctx(), pod))
	pod.Status.Phase = phase
	require.NoError(t, c.Status().Update(ctx(), pod))
}

// finishJobSet writes a JobSet's terminal condition as the JobSet controller would.
func finishJobSet(t *testing.T, js *jobsetv1alpha2.JobSet, ct jobsetv1alpha2.JobSetConditionType) {
	t.Helper()
	eventually(t, func() error {
		var cur jobsetv1alpha2.JobSet
		if err := c.Get(ctx(), client.ObjectKeyFromObject(js), &cur); err != nil {
			return err
		}
		cur.Status.Conditions = append(cur.Status.Conditions, metav1.Condition{Type: string(ct), Status: metav1.ConditionTrue, Reason: "r", Message: "m", LastTransitionTime: metav1.Now()})
		return c.Status().Update(ctx(), &cur)
	})
}
