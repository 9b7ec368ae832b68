// Package optimizationjob tests the OptimizationJob kind against a real
// kube-apiserver and etcd (test/integration/framework) with Trainyard's
// manager in process (every kind: the trials are TrainJobs that the TrainJob
// controller runs into JobSets), its webhooks, and the garbage collector.
// No JobSet controller runs: tests finish a trial by writing its JobSet's
// status, and report its metric by writing its TrainJob's trainerStatus,
// as the status server does.
package optimizationjob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/test/integration/framework"
)

var env *framework.Env

func TestMain(m *testing.M) {
	framework.Main(m, &env, framework.Options{Webhooks: true}, nil)
}

func ctx() context.Context { return context.Background() }

// applyRuntime creates the torch-distributed ClusterTrainingRuntime every
// trial runs on.
func applyRuntime(e *framework.Env) error {
	data, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "runtimes", "torch-distributed.yaml"))
	if err != nil {
		return err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := e.Client.Create(ctx(), u); client.IgnoreAlreadyExists(err) != nil {
			return err
		}
	}
}

// start runs the manager for one test.
func start(t *testing.T) {
	t.Helper()
	require.NoError(t, env.StartManager(framework.ManagerOptions{}))
	t.Cleanup(env.StopManager)
	require.NoError(t, applyRuntime(env)) // its webhook is the manager's
}

func eventually(t *testing.T, fn func() error) { t.Helper(); framework.Eventually(t, fn) }

// optJob is an OptimizationJob of n trials, p at a time, searching lr
// (log-uniform) and batch_size (categorical) for the smallest loss, with
// random search seeded 7.
func optJob(ns, name string, n, p int32) *trainer.OptimizationJob {
	return &trainer.OptimizationJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: trainer.OptimizationJobSpec{
			Objectives:      []trainer.Objective{{Metric: "loss", Direction: trainer.ObjectiveDirectionMinimize}},
			SearchAlgorithm: &trainer.SearchAlgorithm{Random: &trainer.RandomAlgorithm{Seed: ptr.To[int64](7)}},
			Parameters: []trainer.Parameter{
				{Name: "lr", SearchSpace: &trainer.SearchSpace{LogUniform: trainer.LogUniformSpace{Min: "0.0001", Max: "0.1"}}},
				{Name: "batch_size", SearchSpace: &trainer.SearchSpace{Categorical: trainer.CategoricalSpace{Choices: []string{"32", "64", "128"}}}},
			},
			NumTrials: n, ParallelTrials: p,
			TrainJobTemplate: trainer.TrainJobTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"team": "vision"}},
				Spec: trainer.TrainJobSpec{
					RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"},
					Trainer: &trainer.Trainer{
						Image:    ptr.To("example.com/train:v1"),
						Command:  []string{"python3", "train.py"},
						NumNodes: ptr.To[int32](1),
						Env:      []corev1.EnvVar{{Name: "EPOCHS", Value: "1"}},
					},
				},
			},
		},
	}
}

func getJob(t *testing.T, ns, name string) *trainer.OptimizationJob {
	t.Helper()
	var j trainer.OptimizationJob
	require.NoError(t, env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, &j))
	return &j
}

// trials lists the TrainJobs labelled with the OptimizationJob's name, by name.
func trials(t *testing.T, ns, job string) []trainer.TrainJob {
	t.Helper()
	var list trainer.TrainJobList
	require.NoError(t, env.Client.List(ctx(), &list, client.InNamespace(ns), client.MatchingLabels{trainer.OptimizationJobNameLabel: job}))
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items
}

func names(tjs []trainer.TrainJob) []string {
	out := make([]string, len(tjs))
	for i := range tjs {
		out[i] = tjs[i].Name
	}
	return out
}

// waitTrials waits until the job has exactly these trials.
func waitTrials(t *testing.T, ns, job string, want ...string) []trainer.TrainJob {
	t.Helper()
	var got []trainer.TrainJob
	eventually(t, func() error {
		got = trials(t, ns, job)
		if !slices.Equal(names(got), want) {
			return fmt.Errorf("trials %v, want %v", names(got), want)
		}
		return nil
	})
	return got
}

func finished(tj *trainer.TrainJob) bool {
	return apimeta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete) ||
		apimeta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobFailed)
}

// report writes a trial's metric as the status server does (the trainer's
// update_trainjob_status).
func report(t *testing.T, ns, name, metric, value string) {
	t.Helper()
	require.NoError(t, reportErr(ns, name, metric, value))
}

func reportErr(ns, name, metric, value string) error {
	patch := fmt.Sprintf(`{"status":{"trainerStatus":{"lastUpdatedTime":%q,"metrics":[{"name":%q,"value":%q}]}}}`,
		time.Now().UTC().Format(time.RFC3339), metric, value)
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	return env.Client.Status().Patch(ctx(), tj, client.RawPatch("application/merge-patch+json", []byte(patch)), client.FieldOwner("trainer-status"))
}

// finish ends a trial's JobSet as the JobSet controller would (completed or
// failed), once the TrainJob controller made it.
func finish(t *testing.T, ns, name string, failed bool) {
	t.Helper()
	cond := metav1.Condition{Type: string(jobsetv1alpha2.JobSetCompleted), Status: metav1.ConditionTrue,
		Reason: "AllJobsCompleted", Message: "jobset completed successfully", LastTransitionTime: metav1.Now()}
	if failed {
		cond = metav1.Condition{Type: string(jobsetv1alpha2.JobSetFailed), Status: metav1.ConditionTrue,
			Reason: "FailedJobs", Message: "jobset failed", LastTransitionTime: metav1.Now()}
	}
	eventually(t, func() error {
		var js jobsetv1alpha2.JobSet
		if err := env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, &js); err != nil {
			return err
		}
		js.Status.Conditions = append(js.Status.Conditions, cond)
		return env.Client.Status().Update(ctx(), &js)
	})
}

// waitCondition waits until the job's condition has this status and reason.
func waitCondition(t *testing.T, ns, name, typ string, status metav1.ConditionStatus, reason string) *trainer.OptimizationJob {
	t.Helper()
	var j *trainer.OptimizationJob
	eventually(t, func() error {
		j = getJob(t, ns, name)
		if j.Status == nil {
			return fmt.Errorf("no status yet")
		}
		c := apimeta.FindStatusCondition(j.Status.Conditions, typ)
		if c == nil || c.Status != status || c.Reason != reason {
			return fmt.Errorf("condition %s is %+v, want %s/%s", typ, c, status, reason)
		}
		return nil
	})
	return j
}

// median of durations.
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// voptimizationjob is the name of the OptimizationJob's validating webhook.
const voptimizationjob = "voptimizationjob.trainer.kubeflow.org"

// withoutWebhook runs fn with the OptimizationJob webhook taken out of the
// cluster's ValidatingWebhookConfiguration (as a cluster that installed
// Trainyard without webhooks), then puts it back.
func withoutWebhook(t *testing.T, fn func()) {
	t.Helper()
	var list admissionregistrationv1.ValidatingWebhookConfigurationList
	require.NoError(t, env.Client.List(ctx(), &list))
	for i := range list.Items {
		cfg := &list.Items[i]
		k := slices.IndexFunc(cfg.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return w.Name == voptimizationjob })
		if k < 0 {
			continue
		}
		hook := cfg.Webhooks[k]
		cfg.Webhooks = slices.Delete(cfg.Webhooks, k, k+1)
		require.NoError(t, env.Client.Update(ctx(), cfg))
		defer func() {
			eventually(t, func() error {
				var cur admissionregistrationv1.ValidatingWebhookConfiguration
				if err := env.Client.Get(ctx(), client.ObjectKeyFromObject(cfg), &cur); err != nil {
					return err
				}
				cur.Webhooks = append(cur.Webhooks, hook)
				return env.Client.Update(ctx(), &cur)
			})
		}()
		fn() // the API server reloads its configurations in a moment: fn retries

		return
	}
	t.Fatalf("no ValidatingWebhookConfiguration has %s", voptimizationjob)
}
