package optimizationjob

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/observe"
)

// trainJobKind is the group and kind of a trial.
var trainJobKind = schema.GroupKind{Group: trainer.GroupVersion.Group, Kind: trainer.TrainJobKind}

// trialSuffix joins an OptimizationJob's name and a trial's index.
const trialSuffix = "-trial-"

// TrialName is the name of trial i of the OptimizationJob job.
func TrialName(job string, i int) string { return job + trialSuffix + strconv.Itoa(i) }

// EnvName is the environment variable that carries parameter name to the
// trainer: KUBEFLOW_TRAINER_OPT_ and the name in upper case.
func EnvName(name string) string { return trainer.TrialParameterEnvPrefix + strings.ToUpper(name) }

// annotationKey is the annotation of one parameter, "" when the name makes
// no valid annotation key (longer than 53 characters, or ending in "_"):
// the JSON annotation of all parameters carries it still.
func annotationKey(name string) string {
	key := trainer.TrialParameterAnnotationPrefix + name
	if len(validation.IsQualifiedName(key)) > 0 {
		return ""
	}
	return key
}

// newTrial makes trial i's TrainJob from the template: the template's labels
// and annotations, the OptimizationJob's name as a label, the index and the
// parameters as annotations, and each parameter in the trainer's env (a
// template env var of the same name is replaced). The syncer adds the owner.
func newTrial(job *trainer.OptimizationJob, i int, params []trainer.ParameterAssignment) *trainer.TrainJob {
	tmpl := job.Spec.TrainJobTemplate.DeepCopy()
	tj := &trainer.TrainJob{
		TypeMeta: metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind},
		ObjectMeta: metav1.ObjectMeta{
			Name: TrialName(job.Name, i), Namespace: job.Namespace,
			Labels: tmpl.Labels, Annotations: tmpl.Annotations, Finalizers: tmpl.Finalizers,
		},
		Spec: tmpl.Spec,
	}
	if tj.Labels == nil {
		tj.Labels = map[string]string{}
	}
	tj.Labels[trainer.OptimizationJobNameLabel] = job.Name
	if tj.Annotations == nil {
		tj.Annotations = map[string]string{}
	}
	tj.Annotations[trainer.TrialIndexAnnotation] = strconv.Itoa(i)
	all, _ := json.Marshal(params) // strings only: cannot fail
	tj.Annotations[trainer.TrialParametersAnnotation] = string(all)
	if tj.Spec.Trainer == nil {
		tj.Spec.Trainer = &trainer.Trainer{}
	}
	env := tj.Spec.Trainer.Env
	for _, p := range params {
		if key := annotationKey(p.Name); key != "" {
			tj.Annotations[key] = p.Value
		}
		env = setEnv(env, EnvName(p.Name), p.Value)
	}
	tj.Spec.Trainer.Env = env
	return tj
}

// setEnv sets name to value in env, in place of an entry of that name.
func setEnv(env []corev1.EnvVar, name, value string) []corev1.EnvVar {
	for k := range env {
		if env[k].Name == name {
			env[k] = corev1.EnvVar{Name: name, Value: value}
			return env
		}
	}
	return append(env, corev1.EnvVar{Name: name, Value: value})
}

// ParametersOf reads a trial's parameters from its annotation (nil when it
// has none that parses).
func ParametersOf(tj *trainer.TrainJob) []trainer.ParameterAssignment {
	var out []trainer.ParameterAssignment
	if err := json.Unmarshal([]byte(tj.Annotations[trainer.TrialParametersAnnotation]), &out); err != nil {
		return nil
	}
	return out
}

// observedTrials are the job's observed TrainJobs by name.
func observedTrials(obs *observe.Observed) map[string]*trainer.TrainJob {
	out := map[string]*trainer.TrainJob{}
	if obs == nil {
		return out
	}
	for key, o := range obs.Children {
		if key.GroupKind != trainJobKind {
			continue
		}
		if tj, ok := o.(*trainer.TrainJob); ok {
			out[key.Name] = tj
		}
	}
	return out
}

// trialIndex is the index of a trial of job by its name (-1: not a trial
// name of job's).
func trialIndex(job, name string) int {
	rest, ok := strings.CutPrefix(name, job+trialSuffix)
	if !ok {
		return -1
	}
	i, err := strconv.Atoi(rest)
	if err != nil || i < 0 || strconv.Itoa(i) != rest {
		return -1
	}
	return i
}

// TrialState is a trial's state as its TrainJob's conditions say, with the
// failure's reason and message.
func TrialState(tj *trainer.TrainJob) (trainer.TrialState, string) {
	for _, c := range tj.Status.Conditions {
		if c.Status != metav1.ConditionTrue {
			continue
		}
		switch c.Type {
		case trainer.TrainJobComplete:
			return trainer.TrialSucceeded, ""
		case trainer.TrainJobFailed:
			msg := c.Reason
			if c.Message != "" {
				msg += ": " + c.Message
			}
			return trainer.TrialFailed, truncate(msg, 1024)
		}
	}
	return trainer.TrialRunning, ""
}

// Objective is the last value of metric the trial reported
// (status.trainerStatus.metrics), and whether it is a number.
func Objective(tj *trainer.TrainJob, metric string) (string, float64, error) {
	st := tj.Status.TrainerStatus
	value, found := "", false
	if st != nil {
		for _, m := range st.Metrics {
			if m.Name == metric {
				value, found = m.Value, true
			}
		}
	}
	if !found {
		return "", 0, fmt.Errorf("reported no metric %q", metric)
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
	if err != nil || math.IsNaN(f) {
		return value, 0, fmt.Errorf("reported %s=%q, not a number", metric, value)
	}
	return value, f, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// trialRef is a trial's TrainJob as the related object of an event about
// it (events of one reason about different trials stay apart).
func trialRef(namespace, name string) *trainer.TrainJob {
	return &trainer.TrainJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
	}
}
