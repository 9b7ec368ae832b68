package optimizationjob

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/test/integration/framework"
)

// scale is how many OptimizationJobs of how many trials TestManyJobs runs:
// OPTJOB_SCALE=JOBSxTRIALS (the run is 100x10), by default 10x5.
func scale(t *testing.T) (int, int) {
	s := os.Getenv("OPTJOB_SCALE")
	if s == "" {
		s = "10x5"
	}
	a, b, ok := strings.Cut(s, "x")
	n, err1 := strconv.Atoi(a)
	m, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || m < 1 || m > 97 {
		t.Fatalf("OPTJOB_SCALE=%q: want JOBSxTRIALS, trials at most 97", s)
	}
	return n, m
}

// lossOf is trial i of job j's loss: distinct for each i < 97 of a job.
func lossOf(j, i int) string { return fmt.Sprintf("%.1f", float64((i*37+j*11)%97)/10+0.1) }

// Many OptimizationJobs at once, every trial finished as soon as its JobSet
// exists: every job ends Complete with the trial of the smallest loss, each
// has exactly its trials, and no trial is created twice (the manager's
// trials_created_total is exactly jobs x trials). Logs the time it took and
// the test process's heap (manager, clients and the test).
func TestManyJobs(t *testing.T) {
	jobs, perJob := scale(t)
	start(t)
	ns := framework.NewNamespace(t, env.Client, "many")
	began := time.Now()
	for j := range jobs {
		require.NoError(t, env.Client.Create(ctx(), optJob(ns, fmt.Sprintf("job%d", j), int32(perJob), int32(max(perJob/2, 1)))))
	}

	// The completer: what the trainers and the JobSet controller would do.
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		finishedSet := map[string]bool{}
		for {
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			var list jobsetv1alpha2.JobSetList
			if err := env.Client.List(ctx(), &list, client.InNamespace(ns)); err != nil {
				continue
			}
			for k := range list.Items {
				js := &list.Items[k]
				if finishedSet[js.Name] {
					continue
				}
				job, idx, ok := strings.Cut(js.Name, "-trial-")
				if !ok {
					continue
				}
				j, _ := strconv.Atoi(strings.TrimPrefix(job, "job"))
				i, _ := strconv.Atoi(idx)
				if reportErr(ns, js.Name, "loss", lossOf(j, i)) != nil {
					continue // not t.Fatal: this is not the test's goroutine
				}
				js.Status.Conditions = append(js.Status.Conditions, metav1.Condition{Type: string(jobsetv1alpha2.JobSetCompleted),
					Status: metav1.ConditionTrue, Reason: "AllJobsCompleted", Message: "done", LastTransitionTime: metav1.Now()})
				if env.Client.Status().Update(ctx(), js) == nil {
					finishedSet[js.Name] = true
				}
			}
		}
	}()
	defer func() { close(done); wg.Wait() }()

	deadline := time.Now().Add(time.Duration(jobs*perJob)*time.Second + 2*time.Minute)
	for {
		var list trainer.OptimizationJobList
		require.NoError(t, env.Client.List(ctx(), &list, client.InNamespace(ns)))
		complete := 0
		for k := range list.Items {
			if done, _ := (adapterFinished(&list.Items[k])); done {
				complete++
			}
		}
		if complete == jobs {
			break
		}
		require.True(t, time.Now().Before(deadline), "%d of %d OptimizationJobs finished in time", complete, jobs)
		time.Sleep(time.Second)
	}
	took := time.Since(began)

	var tjs trainer.TrainJobList
	require.NoError(t, env.Client.List(ctx(), &tjs, client.InNamespace(ns)))
	require.Len(t, tjs.Items, jobs*perJob, "TrainJobs")
	for j := range jobs {
		name := fmt.Sprintf("job%d", j)
		got := getJob(t, ns, name)
		require.True(t, metaTrue(got, trainer.OptimizationJobComplete), "%s: %v", name, got.Status.Conditions)
		best, bestV := -1, 0.0
		for i := range perJob {
			v, _ := strconv.ParseFloat(lossOf(j, i), 64)
			if best < 0 || v < bestV {
				best, bestV = i, v
			}
		}
		require.Equal(t, fmt.Sprintf("%s-trial-%d", name, best), got.Status.Result.TrainJobName, "%s's best trial", name)
		require.Equal(t, int32(perJob), got.Status.TrialsCreated)
		require.Equal(t, int32(perJob), got.Status.TrialsSucceeded)
	}
	created := counterValue(t, "trainyard_optimizationjob_trials_created_total")
	require.Equal(t, float64(jobs*perJob), created, "trials created: a trial was created twice")

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("%d OptimizationJobs x %d trials: all Complete with the right best trial, %d TrainJobs, trials_created_total %.0f, in %v; test process heap in use %d MiB, Sys %d MiB",
		jobs, perJob, len(tjs.Items), created, took.Round(time.Second), ms.HeapInuse>>20, ms.Sys>>20)
}

func adapterFinished(j *trainer.OptimizationJob) (bool, string) {
	for _, c := range []string{trainer.OptimizationJobComplete, trainer.OptimizationJobFailed} {
		if j.Status != nil && metaTrue(j, c) {
			return true, c
		}
	}
	return false, ""
}

func metaTrue(j *trainer.OptimizationJob, typ string) bool {
	if j.Status == nil {
		return false
	}
	for _, c := range j.Status.Conditions {
		if c.Type == typ {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

// counterValue reads a counter of the manager's registry.
func counterValue(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := env.Metrics.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		sum := 0.0
		for _, m := range mf.GetMetric() {
			sum += counter(m)
		}
		return sum
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func counter(m *dto.Metric) float64 {
	if c := m.GetCounter(); c != nil {
		return c.GetValue()
	}
	return 0
}
