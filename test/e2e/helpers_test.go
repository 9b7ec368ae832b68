package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/localcluster"
	"github.com/trainyard/trainyard/test/e2eutil"
)

// Timeouts: kwok moves a pod through each stage after 1–6 s.
const (
	short = time.Minute
	long  = 4 * time.Minute
)

// kwok's per-pod controls (pod/general and pod/chaos stages).
const (
	completeDelay  = localcluster.KwokPodCompleteDelay
	completeJitter = localcluster.KwokPodCompleteJitter
	failLabel      = "pod-container-running-failed.stage.kwok.x-k8s.io"
)

// runningFor are the annotations that keep a pod running for about d before kwok
// completes it. kwok waits min(delay, jitter-delay) when the jitter is not larger
// than the delay, and the stage's default jitter is 5s, so both are needed.
func runningFor(d time.Duration) map[string]string {
	return map[string]string{completeDelay: d.String(), completeJitter: (d + time.Second).String()}
}

func ctx() context.Context { return context.Background() }

func repoFile(rel string) string {
	root, err := localcluster.FindRepoDir(".")
	if err != nil {
		panic(err)
	}
	return filepath.Join(root, rel)
}

// newNamespace creates a namespace with its default ServiceAccount ready.
func newNamespace(t *testing.T) string {
	t.Helper()
	return e2eutil.NewNamespace(t, cli, "e2e-", short)
}

// waitFor retries fn until it returns nil.
func waitFor(t *testing.T, timeout time.Duration, fn func() error) {
	t.Helper()
	e2eutil.WaitFor(t, timeout, fn)
}

// loadTrainJob reads a TrainJob from a YAML file of the repository, unchanged
// but for its namespace (and name, when given).
func loadTrainJob(t *testing.T, rel, ns, name string) *trainer.TrainJob {
	t.Helper()
	return e2eutil.LoadTrainJob(t, repoFile(rel), ns, name)
}

// withPods adds pod labels and annotations to the trainer's pods through a
// podTemplateOverride, which is how a user changes a runtime's pods.
func withPods(job *trainer.TrainJob, labels, annotations map[string]string) *trainer.TrainJob {
	job.Spec.PodTemplateOverrides = append(job.Spec.PodTemplateOverrides, trainer.PodTemplateOverride{
		TargetJobs: []trainer.PodTemplateOverrideTargetJob{{Name: "node"}},
		Metadata:   &metav1.ObjectMeta{Labels: labels, Annotations: annotations},
	})
	return job
}

// runFor keeps each pod running for d before kwok completes it.
func runFor(job *trainer.TrainJob, d time.Duration) *trainer.TrainJob {
	return withPods(job, nil, runningFor(d))
}

func get(t *testing.T, ns, name string) *trainer.TrainJob {
	t.Helper()
	var job trainer.TrainJob
	if err := cli.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, &job); err != nil {
		t.Fatal(err)
	}
	return &job
}

// waitState waits until the TrainJob shows this phase (and reason, if given).
func waitState(t *testing.T, ns, name string, phase trainer.TrainJobPhase, reason string, timeout time.Duration) *trainer.TrainJob {
	t.Helper()
	var job trainer.TrainJob
	waitFor(t, timeout, func() error {
		if err := cli.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, &job); err != nil {
			return err
		}
		if job.Status.Phase != phase || (reason != "" && job.Status.Reason != reason) {
			return fmt.Errorf("TrainJob %s: %s/%s (%s), want %s/%s", name, job.Status.Phase, job.Status.Reason, job.Status.Message, phase, reason)
		}
		return nil
	})
	return &job
}

// pods lists the pods of the TrainJob's JobSet.
func pods(t *testing.T, ns, name string) []corev1.Pod {
	t.Helper()
	var list corev1.PodList
	if err := cli.List(ctx(), &list, client.InNamespace(ns), client.MatchingLabels{jobsetv1alpha2.JobSetNameKey: name}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func jobSetsOf(t *testing.T, job *trainer.TrainJob) []jobsetv1alpha2.JobSet {
	t.Helper()
	var list jobsetv1alpha2.JobSetList
	if err := cli.List(ctx(), &list, client.InNamespace(job.Namespace)); err != nil {
		t.Fatal(err)
	}
	var out []jobsetv1alpha2.JobSet
	for _, js := range list.Items {
		if ref := metav1.GetControllerOf(&js); ref != nil && ref.UID == job.UID {
			out = append(out, js)
		}
	}
	return out
}

func patchJob(t *testing.T, ns, name string, mutate func(*trainer.TrainJob)) {
	t.Helper()
	waitFor(t, short, func() error {
		var job trainer.TrainJob
		if err := cli.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, &job); err != nil {
			return err
		}
		mutate(&job)
		return cli.Update(ctx(), &job)
	})
}

// statusServerEnv are the variables every trainer container gets from the
// status server's plugin (checked in full by the TrainJobStatus plugin's tests and
// TestTrainerStatusReport on the process node).
var statusServerEnv = []string{"KUBEFLOW_TRAINER_SERVER_URL", "KUBEFLOW_TRAINER_SERVER_CA_CERT", "KUBEFLOW_TRAINER_SERVER_TOKEN"}

// statusServerVolume is the token volume that goes with statusServerEnv.
const statusServerVolume = "kubeflow-trainer-token"

// withoutStatusServer checks that a trainer container has the status server's
// variables and token mount, and returns its env and mounts without them, so
// that a test compares what its framework's plugin adds.
func withoutStatusServer(t *testing.T, c corev1.Container) ([]corev1.EnvVar, []corev1.VolumeMount) {
	t.Helper()
	var env []corev1.EnvVar
	seen := 0
	for _, e := range c.Env {
		if slices.Contains(statusServerEnv, e.Name) {
			seen++
			continue
		}
		env = append(env, e)
	}
	var mounts []corev1.VolumeMount
	for _, m := range c.VolumeMounts {
		if m.Name == statusServerVolume {
			seen++
			continue
		}
		mounts = append(mounts, m)
	}
	if seen != len(statusServerEnv)+1 {
		t.Errorf("container %s: %d of the status server's 3 variables and 1 mount", c.Name, seen)
	}
	return env, mounts
}
