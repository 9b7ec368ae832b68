package controller

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/test/integration/framework"
)

var env *framework.Env

func TestMain(m *testing.M) {
	framework.Main(m, &env, framework.Options{}, func(e *framework.Env) (func(), error) {
		e.ExtraPlugins = testPlugins
		return nil, e.StartManager(framework.ManagerOptions{})
	})
}

func ctx() context.Context { return context.Background() }

func newNamespace(t *testing.T) string { return framework.NewNamespace(t, env.Client, "it") }

func eventually(t *testing.T, fn func() error) { t.Helper(); framework.Eventually(t, fn) }

func consistently(t *testing.T, d time.Duration, fn func() error) {
	t.Helper()
	framework.Consistently(t, d, fn)
}

// decodeYAML reads the documents of a YAML file as unstructured objects.
func decodeYAML(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			require.NoError(t, err, "decoding %s", path)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// applyFile creates every object of a YAML file unchanged, putting namespaced
// objects in ns. Cluster-scoped runtimes that already exist are left as they are.
func applyFile(t *testing.T, ns, rel string) []*unstructured.Unstructured {
	t.Helper()
	objs := decodeYAML(t, filepath.Join(framework.RepoRoot(), rel))
	for _, u := range objs {
		if u.GetKind() != trainer.ClusterTrainingRuntimeKind {
			u.SetNamespace(ns)
		}
		err := env.Client.Create(ctx(), u)
		if u.GetKind() == trainer.ClusterTrainingRuntimeKind && client.IgnoreAlreadyExists(err) == nil {
			continue
		}
		require.NoError(t, err, "creating %s %s from %s", u.GetKind(), u.GetName(), rel)
	}
	return objs
}

func getTrainJob(t *testing.T, ns, name string) *trainer.TrainJob {
	t.Helper()
	var job trainer.TrainJob
	require.NoError(t, env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, &job))
	return &job
}

// waitJobSet waits for the TrainJob's JobSet and returns it.
func waitJobSet(t *testing.T, ns, name string) *jobsetv1alpha2.JobSet {
	t.Helper()
	var js jobsetv1alpha2.JobSet
	eventually(t, func() error { return env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, &js) })
	return &js
}

// waitCondition waits until the TrainJob has a condition of this type, status and reason.
func waitCondition(t *testing.T, ns, name, condType string, status metav1.ConditionStatus, reason string) *trainer.TrainJob {
	t.Helper()
	var job trainer.TrainJob
	eventually(t, func() error {
		if err := env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, &job); err != nil {
			return err
		}
		c := meta.FindStatusCondition(job.Status.Conditions, condType)
		if c == nil || c.Status != status || (reason != "" && c.Reason != reason) {
			return fmt.Errorf("condition %s: want %s/%s, have %+v (all: %+v)", condType, status, reason, c, job.Status.Conditions)
		}
		return nil
	})
	return &job
}

// waitCreated waits until the TrainJob's status is written with its JobSet in
// place: a phase, and, as upstream, no Created condition (Trainyard sets one
// only to report an error).
func waitCreated(t *testing.T, ns, name string) *trainer.TrainJob {
	t.Helper()
	var job trainer.TrainJob
	eventually(t, func() error {
		if err := env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, &job); err != nil {
			return err
		}
		if job.Status.Phase == "" || job.Status.NumNodes == nil {
			return fmt.Errorf("status not written with the JobSet yet: %+v", job.Status)
		}
		if c := meta.FindStatusCondition(job.Status.Conditions, trainer.TrainJobCreated); c != nil {
			return fmt.Errorf("condition Created on a healthy job: %+v", c)
		}
		return nil
	})
	return &job
}

func waitPhase(t *testing.T, ns, name string, phase trainer.TrainJobPhase) {
	t.Helper()
	eventually(t, func() error {
		job := &trainer.TrainJob{}
		if err := env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, job); err != nil {
			return err
		}
		if job.Status.Phase != phase {
			return fmt.Errorf("phase %q, want %q (conditions %+v)", job.Status.Phase, phase, job.Status.Conditions)
		}
		return nil
	})
}

// jobSetsOwnedBy lists the JobSets in ns controlled by the TrainJob.
func jobSetsOwnedBy(t *testing.T, job *trainer.TrainJob) []jobsetv1alpha2.JobSet {
	t.Helper()
	var list jobsetv1alpha2.JobSetList
	require.NoError(t, env.Client.List(ctx(), &list, client.InNamespace(job.Namespace)))
	var out []jobsetv1alpha2.JobSet
	for _, js := range list.Items {
		if ref := metav1.GetControllerOf(&js); ref != nil && ref.UID == job.UID {
			out = append(out, js)
		}
	}
	return out
}

// envOf returns a container's environment as name → value (fieldRef paths for valueFrom).
func envOf(c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			v = "fieldRef:" + e.ValueFrom.FieldRef.FieldPath
		}
		out[e.Name] = v
	}
	return out
}

func trainerContainer(t *testing.T, js *jobsetv1alpha2.JobSet) corev1.Container {
	t.Helper()
	for _, rj := range js.Spec.ReplicatedJobs {
		if rj.Template.Labels[trainer.AncestorLabel] == trainer.AncestorTrainer {
			for _, c := range rj.Template.Spec.Template.Spec.Containers {
				if c.Name == trainer.NodeContainer {
					return c
				}
			}
		}
	}
	t.Fatalf("JobSet %s has no trainer node container", js.Name)
	return corev1.Container{}
}

// setJobSetStatus writes JobSet status as the JobSet controller would (it does
// not run in this suite).
func setJobSetStatus(t *testing.T, js *jobsetv1alpha2.JobSet, mutate func(*jobsetv1alpha2.JobSetStatus)) {
	t.Helper()
	eventually(t, func() error {
		var cur jobsetv1alpha2.JobSet
		if err := env.Client.Get(ctx(), client.ObjectKeyFromObject(js), &cur); err != nil {
			return err
		}
		mutate(&cur.Status)
		return env.Client.Status().Update(ctx(), &cur)
	})
}

func ptrIntOrString(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
