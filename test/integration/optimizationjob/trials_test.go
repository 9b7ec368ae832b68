package optimizationjob

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/test/integration/framework"
)

// An OptimizationJob of 4 trials, 2 at a time, runs each trial as a
// TrainJob (owned, labelled, its parameters as annotations and in the
// trainer's env, down to the JobSet's node container), never has more than
// 2 unfinished, takes each trial's last reported loss as its objective and
// ends Complete with the smallest in status.result. Prints the trial
// overhead: from a trial's TrainJob turning Complete to the next trial's
// TrainJob existing.
func TestTrialsRunToBest(t *testing.T) {
	start(t)
	ns := framework.NewNamespace(t, env.Client, "opt")
	require.NoError(t, env.Client.Create(ctx(), optJob(ns, "tune", 4, 2)))

	first := waitTrials(t, ns, "tune", "tune-trial-0", "tune-trial-1")
	framework.Consistently(t, time.Second, func() error {
		if got := trials(t, ns, "tune"); len(got) != 2 {
			return fmt.Errorf("%d trials before any finished, want parallelTrials=2: %v", len(got), names(got))
		}
		return nil
	})

	tj := first[0]
	job := getJob(t, ns, "tune")
	owner := metav1.GetControllerOf(&tj)
	require.NotNil(t, owner, "trial has no controller owner")
	require.Equal(t, []string{trainer.OptimizationJobKind, "tune", string(job.UID)}, []string{owner.Kind, owner.Name, string(owner.UID)})
	require.Equal(t, "tune", tj.Labels[trainer.OptimizationJobNameLabel])
	require.Equal(t, "vision", tj.Labels["team"], "the template's labels reach every trial")
	require.Equal(t, "0", tj.Annotations[trainer.TrialIndexAnnotation])
	var params []trainer.ParameterAssignment
	require.NoError(t, json.Unmarshal([]byte(tj.Annotations[trainer.TrialParametersAnnotation]), &params))
	require.Len(t, params, 2)
	require.Equal(t, []string{"lr", "batch_size"}, []string{params[0].Name, params[1].Name})
	require.Equal(t, params[0].Value, tj.Annotations[trainer.TrialParameterAnnotationPrefix+"lr"])
	require.Contains(t, []string{"32", "64", "128"}, params[1].Value)
	vars := map[string]string{}
	for _, e := range tj.Spec.Trainer.Env {
		vars[e.Name] = e.Value
	}
	require.Equal(t, map[string]string{"EPOCHS": "1", "KUBEFLOW_TRAINER_OPT_LR": params[0].Value, "KUBEFLOW_TRAINER_OPT_BATCH_SIZE": params[1].Value}, vars)

	// The TrainJob kind runs the trial: its JobSet's node container has the parameters.
	var js jobsetv1alpha2.JobSet
	eventually(t, func() error { return env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: tj.Name}, &js) })
	found := false
	for _, rj := range js.Spec.ReplicatedJobs {
		for _, c := range rj.Template.Spec.Template.Spec.Containers {
			if c.Name != trainer.NodeContainer {
				continue
			}
			for _, e := range c.Env {
				if e.Name == "KUBEFLOW_TRAINER_OPT_LR" && e.Value == params[0].Value {
					found = true
				}
			}
		}
	}
	require.True(t, found, "the trial's JobSet node container lacks KUBEFLOW_TRAINER_OPT_LR=%s", params[0].Value)

	// Trial i reports loss[i] (trial 1 twice: the last value counts), then finishes.
	loss := []string{"0.9", "0.4", "0.7", "0.2"}
	var overhead []time.Duration
	for i := range 4 {
		name := fmt.Sprintf("tune-trial-%d", i)
		eventually(t, func() error {
			return env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, &jobsetv1alpha2.JobSet{})
		})
		if i == 1 {
			report(t, ns, name, "loss", "0.1")
		}
		report(t, ns, name, "loss", loss[i])
		finish(t, ns, name, false)
		done := pollUntil(t, func() bool {
			var cur trainer.TrainJob
			return env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, &cur) == nil && finished(&cur)
		})
		if next := i + 2; next < 4 {
			created := pollUntil(t, func() bool {
				return env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("tune-trial-%d", next)}, &trainer.TrainJob{}) == nil
			})
			overhead = append(overhead, created.Sub(done))
			got := trials(t, ns, "tune")
			unfinished := 0
			for k := range got {
				if !finished(&got[k]) {
					unfinished++
				}
			}
			require.LessOrEqual(t, unfinished, 2, "more than parallelTrials unfinished: %v", names(got))
		}
	}
	t.Logf("trial overhead (TrainJob Complete seen -> next trial's TrainJob seen), median of %d: %v (all: %v)", len(overhead), median(overhead), overhead)

	job = waitCondition(t, ns, "tune", trainer.OptimizationJobComplete, metav1.ConditionTrue, trainer.OptimizationJobTrialsFinishedReason)
	st := job.Status
	require.Equal(t, "tune-trial-3", st.Result.TrainJobName)
	require.Equal(t, "0.2", st.Result.ObjectiveValue)
	best := trials(t, ns, "tune")[3]
	var bestParams []trainer.ParameterAssignment
	require.NoError(t, json.Unmarshal([]byte(best.Annotations[trainer.TrialParametersAnnotation]), &bestParams))
	require.Equal(t, bestParams, st.Result.Parameters)
	require.Equal(t, []int32{4, 0, 4, 4, 0}, []int32{st.TrialsCreated, st.TrialsRunning, st.TrialsFinished, st.TrialsSucceeded, st.TrialsFailed})
	require.Len(t, st.Trials, 4)
	require.Equal(t, trainer.TrialStatus{Name: "tune-trial-1", State: trainer.TrialSucceeded, ObjectiveValue: "0.4"}, st.Trials[1])
	require.True(t, metaFalse(job, trainer.OptimizationJobRunning), "Running should be False once every trial finished")
	require.Len(t, trials(t, ns, "tune"), 4, "a finished OptimizationJob made more trials")

	framework.WaitEvent(t, env.Client, ns, "tune", "Completed")
	require.Equal(t, 4, countEvents(t, ns, "tune", "TrialCreated"))
	require.Equal(t, 4, countEvents(t, ns, "tune", "TrialSucceeded"))

	// Same seed, same spec: the same trials' parameters (all 4 at once).
	require.NoError(t, env.Client.Create(ctx(), optJob(ns, "again", 4, 4)))
	again := waitTrials(t, ns, "again", "again-trial-0", "again-trial-1", "again-trial-2", "again-trial-3")
	for i, tj := range trials(t, ns, "tune") {
		require.Equal(t, tj.Annotations[trainer.TrialParametersAnnotation], again[i].Annotations[trainer.TrialParametersAnnotation], "trial %d of the same seed", i)
	}
}

func metaFalse(j *trainer.OptimizationJob, typ string) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == typ {
			return c.Status == metav1.ConditionFalse
		}
	}
	return false
}

// pollUntil polls cond every 5 ms (at most framework.Timeout) and returns
// when it first held.
func pollUntil(t *testing.T, cond func() bool) time.Time {
	t.Helper()
	deadline := time.Now().Add(framework.Timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return time.Now()
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("condition not reached in time")
	return time.Time{}
}

// countEvents counts the events of reason about the object name.
func countEvents(t *testing.T, ns, name, reason string) int {
	t.Helper()
	var list eventsv1.EventList
	require.NoError(t, env.Client.List(ctx(), &list, client.InNamespace(ns)))
	n := 0
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Reason == reason {
			n++
		}
	}
	return n
}

// A failed trial counts as a trial: with one of two failed the job is
// Complete (one failed); a trial whose TrainJob is deleted before it
// finished fails and is not run again; when every trial failed the job is
// Failed.
func TestFailedTrials(t *testing.T) {
	start(t)
	ns := framework.NewNamespace(t, env.Client, "opt")

	require.NoError(t, env.Client.Create(ctx(), optJob(ns, "mixed", 2, 2)))
	waitTrials(t, ns, "mixed", "mixed-trial-0", "mixed-trial-1")
	finish(t, ns, "mixed-trial-0", true)
	report(t, ns, "mixed-trial-1", "loss", "0.5")
	finish(t, ns, "mixed-trial-1", false)
	j := waitCondition(t, ns, "mixed", trainer.OptimizationJobComplete, metav1.ConditionTrue, trainer.OptimizationJobTrialsFinishedReason)
	require.Equal(t, []int32{1, 1}, []int32{j.Status.TrialsSucceeded, j.Status.TrialsFailed})
	require.Equal(t, "mixed-trial-1", j.Status.Result.TrainJobName)
	require.Equal(t, trainer.TrialFailed, j.Status.Trials[0].State)
	require.Contains(t, j.Status.Trials[0].Message, "FailedJobs")
	framework.WaitEvent(t, env.Client, ns, "mixed", "TrialFailed")

	require.NoError(t, env.Client.Create(ctx(), optJob(ns, "doomed", 3, 2)))
	waitTrials(t, ns, "doomed", "doomed-trial-0", "doomed-trial-1")
	// Deleted before it finished: failed, and its slot goes to trial 2.
	require.NoError(t, env.Client.Delete(ctx(), &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "doomed-trial-0"}}))
	waitTrials(t, ns, "doomed", "doomed-trial-1", "doomed-trial-2")
	finish(t, ns, "doomed-trial-1", true)
	finish(t, ns, "doomed-trial-2", true)
	j = waitCondition(t, ns, "doomed", trainer.OptimizationJobFailed, metav1.ConditionTrue, trainer.OptimizationJobAllTrialsFailedReason)
	require.Equal(t, []int32{3, 0, 3}, []int32{j.Status.TrialsCreated, j.Status.TrialsSucceeded, j.Status.TrialsFailed})
	require.Equal(t, "TrainJob deleted before it finished", j.Status.Trials[0].Message)
	require.Empty(t, j.Status.Result.TrainJobName)
	framework.Consistently(t, 2*time.Second, func() error {
		if got := names(trials(t, ns, "doomed")); len(got) != 2 {
			return fmt.Errorf("trials %v: the deleted trial 0 was made again", got)
		}
		return nil
	})
}

// A manager restart loses nothing and duplicates nothing: trials created
// before it keep their UIDs, a trial that finished while the manager was
// down frees its slot for exactly one new trial, and with the status's
// records wiped (a status write lost) the trials observed are recorded
// again, not created again.
func TestRestartCreatesNoDuplicate(t *testing.T) {
	start(t)
	ns := framework.NewNamespace(t, env.Client, "opt")
	require.NoError(t, env.Client.Create(ctx(), optJob(ns, "restart", 3, 2)))
	before := waitTrials(t, ns, "restart", "restart-trial-0", "restart-trial-1")
	waitCondition(t, ns, "restart", trainer.OptimizationJobRunning, metav1.ConditionTrue, trainer.OptimizationJobTrialsRunningReason)

	env.StopManager()
	report(t, ns, "restart-trial-0", "loss", "0.3")
	// The TrainJob controller is down too: finish the trial's TrainJob as it would.
	setTrainJobCondition(t, ns, "restart-trial-0", trainer.TrainJobComplete)
	// And lose the OptimizationJob's records, as a lost status write would.
	j := getJob(t, ns, "restart")
	j.Status.Trials = nil
	j.Status.TrialsCreated = 0
	require.NoError(t, env.Client.Status().Update(ctx(), j))

	start(t)
	after := waitTrials(t, ns, "restart", "restart-trial-0", "restart-trial-1", "restart-trial-2")
	for i := range before {
		require.Equal(t, before[i].UID, after[i].UID, "trial %s was made again", before[i].Name)
	}
	framework.Consistently(t, 2*time.Second, func() error {
		if got := trials(t, ns, "restart"); len(got) != 3 {
			return fmt.Errorf("trials %v after the restart, want 3", names(got))
		}
		return nil
	})
	j = getJob(t, ns, "restart")
	require.Equal(t, int32(3), j.Status.TrialsCreated)
	require.Equal(t, trainer.TrialStatus{Name: "restart-trial-0", State: trainer.TrialSucceeded, ObjectiveValue: "0.3"}, j.Status.Trials[0])
}

// setTrainJobCondition sets a TrainJob's condition True, as the TrainJob
// controller does when its JobSet finishes.
func setTrainJobCondition(t *testing.T, ns, name, typ string) {
	t.Helper()
	eventually(t, func() error {
		var tj trainer.TrainJob
		if err := env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, &tj); err != nil {
			return err
		}
		tj.Status.Conditions = append(tj.Status.Conditions, metav1.Condition{Type: typ, Status: metav1.ConditionTrue,
			Reason: "AllJobsCompleted", Message: "done", LastTransitionTime: metav1.Now()})
		return env.Client.Status().Update(ctx(), &tj)
	})
}

// Deleting an OptimizationJob deletes its trials (and their JobSets): the
// garbage collector follows the owner references.
func TestDeletionCascades(t *testing.T) {
	start(t)
	ns := framework.NewNamespace(t, env.Client, "opt")
	require.NoError(t, env.Client.Create(ctx(), optJob(ns, "gone", 2, 2)))
	waitTrials(t, ns, "gone", "gone-trial-0", "gone-trial-1")
	eventually(t, func() error {
		return env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "gone-trial-0"}, &jobsetv1alpha2.JobSet{})
	})
	require.NoError(t, env.Client.Delete(ctx(), getJob(t, ns, "gone"), client.PropagationPolicy(metav1.DeletePropagationBackground)))
	eventually(t, func() error {
		if got := trials(t, ns, "gone"); len(got) > 0 {
			return fmt.Errorf("trials left: %v", names(got))
		}
		err := env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "gone-trial-0"}, &jobsetv1alpha2.JobSet{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("trial 0's JobSet: %v", err)
		}
		return nil
	})
}

// Bad input is refused with field paths: by the API server's schema and CEL
// rules, by the webhook for what only Trainyard checks, and, with the
// webhook off, the same errors reach status (Failed, InvalidSpec) and no
// trial is made. The spec is immutable.
func TestBadInput(t *testing.T) {
	start(t)
	ns := framework.NewNamespace(t, env.Client, "opt")
	cases := map[string]struct {
		mutate func(*trainer.OptimizationJob)
		want   string
	}{
		"parallel above numTrials (CEL)": {func(j *trainer.OptimizationJob) { j.Spec.ParallelTrials = 5 }, "parallelTrials cannot exceed numTrials"},
		"grid on a log-uniform parameter (CEL)": {func(j *trainer.OptimizationJob) {
			j.Spec.SearchAlgorithm = &trainer.SearchAlgorithm{Grid: &trainer.GridAlgorithm{}}
		}, "Grid search requires all parameters to be Categorical"},
		"log-uniform min 0 (CEL)": {func(j *trainer.OptimizationJob) {
			j.Spec.Parameters[0].SearchSpace.LogUniform.Min = "0"
		}, "min must be strictly greater than 0"},
		"template with a name (CEL)": {func(j *trainer.OptimizationJob) { j.Spec.TrainJobTemplate.Name = "x" }, "name and namespace cannot be set in a template"},
		"two parameters, one env var (webhook)": {func(j *trainer.OptimizationJob) {
			j.Spec.Parameters = append(j.Spec.Parameters, trainer.Parameter{Name: "LR", SearchSpace: &trainer.SearchSpace{Categorical: trainer.CategoricalSpace{Choices: []string{"1"}}}})
		}, "spec.parameters[2].name: Invalid value: \"LR\": gives the trials the same environment variable KUBEFLOW_TRAINER_OPT_LR"},
		"trial names too long (webhook)": {func(j *trainer.OptimizationJob) { j.Name = strings.Repeat("a", 56) }, "metadata.name: Too long"},
		"bad trainer node count (webhook)": {func(j *trainer.OptimizationJob) {
			n := int32(-1)
			j.Spec.TrainJobTemplate.Spec.Trainer.NumNodes = &n
		}, "spec.trainJobTemplate.spec.trainer.numNodes"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			j := optJob(ns, "bad", 2, 1)
			tc.mutate(j)
			err := env.Client.Create(ctx(), j)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}

	// Immutable.
	require.NoError(t, env.Client.Create(ctx(), optJob(ns, "fixed", 2, 1)))
	j := getJob(t, ns, "fixed")
	j.Spec.NumTrials = 3
	err := env.Client.Update(ctx(), j)
	require.Error(t, err)
	require.Contains(t, err.Error(), "immutable")

	// Webhook off: the same error in status.
	withoutWebhook(t, func() {
		j := optJob(ns, "badlate", 2, 1)
		j.Spec.Parameters = append(j.Spec.Parameters, trainer.Parameter{Name: "LR", SearchSpace: &trainer.SearchSpace{Categorical: trainer.CategoricalSpace{Choices: []string{"1"}}}})
		eventually(t, func() error { return env.Client.Create(ctx(), j.DeepCopy()) })
	})
	got := waitCondition(t, ns, "badlate", trainer.OptimizationJobFailed, metav1.ConditionTrue, trainer.OptimizationJobInvalidSpecReason)
	c := findCondition(got, trainer.OptimizationJobFailed)
	require.Contains(t, c.Message, "spec.parameters[2].name: Invalid value: \"LR\"")
	require.Empty(t, trials(t, ns, "badlate"))
	framework.WaitEvent(t, env.Client, ns, "badlate", "InvalidSpec")
}

func findCondition(j *trainer.OptimizationJob, typ string) *metav1.Condition {
	for i := range j.Status.Conditions {
		if j.Status.Conditions[i].Type == typ {
			return &j.Status.Conditions[i]
		}
	}
	return nil
}
