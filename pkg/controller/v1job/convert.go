package v1job

import (
	"fmt"
	"maps"
	"math"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
)

// PodTemplate is a replica's pod template, as a kind's Pod hook completes it.
type PodTemplate = corev1.PodTemplateSpec

// ToRequest is what the pipeline is asked to run for a job: its identity and
// suspension; the pods are in the runtime (ToRuntime).
func (d *Def) ToRequest(job Job) *runtime.Request {
	return &runtime.Request{
		Name:      job.GetName(),
		Namespace: job.GetNamespace(),
		Labels:    job.GetLabels(),
		Suspend:   ptr.Deref(job.JobRunPolicy().Suspend, false),
		Paths: runtime.Paths{
			Name:    field.NewPath("metadata", "name"),
			Labels:  field.NewPath("metadata", "labels"),
			Runtime: d.specsPath(),
			Spec:    field.NewPath("spec"),
		},
	}
}

// ToRuntime converts a defaulted job into the runtime the pipeline starts
// from: a JobSet template with one replicated job per replica
// (<type>-<index>), each a one-pod Job whose pod has v1's host name
// <job>-<type>-<index>, v1's labels and the kind's environment (Def.Pod),
// with v1's restart policy mapped onto the Job:
//
//   - OnFailure and Always: the pod restarts its containers until
//     runPolicy.backoffLimit restarts (no limit when unset, as in v1);
//   - Never: the first failure fails the job;
//   - ExitCode: exit codes 1-127 of the kind's container fail the job,
//     128-255 (signals, OOM kills) replace the pod, counted against backoffLimit.
//
// The JobSet fails as soon as any Job fails, and succeeds when the kind's
// success role (an MPIJob's Launcher, an XGBoostJob's Master) has.
func (d *Def) ToRuntime(job Job, clusterDomain string) (*runtime.Runtime, error) {
	spec := jobsetv1alpha2.JobSetSpec{
		// v1's names resolve through the per-replica Services (or, for kinds
		// without them, are only host names); JobSet's own headless Service
		// is not needed.
		Network:       &jobsetv1alpha2.Network{EnableDNSHostnames: ptr.To(false)},
		FailurePolicy: &jobsetv1alpha2.FailurePolicy{MaxRestarts: 0},
		SuccessPolicy: &jobsetv1alpha2.SuccessPolicy{Operator: jobsetv1alpha2.OperatorAll},
	}
	var success []string
	for _, t := range d.RolesOf(job) {
		rs := job.ReplicaSpecs()[t]
		for i := range int(ptr.Deref(rs.Replicas, 1)) {
			rj, err := d.replicatedJob(job, t, rs, i, clusterDomain)
			if err != nil {
				return nil, err
			}
			spec.ReplicatedJobs = append(spec.ReplicatedJobs, rj)
			if t == d.SuccessRole {
				success = append(success, rj.Name)
			}
		}
	}
	if len(success) > 0 {
		spec.SuccessPolicy = &jobsetv1alpha2.SuccessPolicy{Operator: jobsetv1alpha2.OperatorAll, TargetReplicatedJobs: success}
	}
	return &runtime.Runtime{
		Kind:       d.Kind,
		Name:       job.GetName(),
		UID:        job.GetUID(),
		Generation: job.GetGeneration(),
		Spec: trainer.TrainingRuntimeSpec{Template: trainer.JobSetTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: d.SelectorLabels(job.GetName())},
			Spec:       spec,
		}},
	}, nil
}

// replicatedJob builds the replicated job of one replica. The Job is
// NonIndexed: an Indexed Job names its pods' hosts <Job>-<index>, overriding
// the template's host name, which must be v1's.
func (d *Def) replicatedJob(job Job, rtype kubeflowv1.ReplicaType, rs *kubeflowv1.ReplicaSpec, index int, clusterDomain string) (jobsetv1alpha2.ReplicatedJob, error) {
	name := ReplicatedJobName(rtype, index)
	if len(rs.Template.Spec.Containers) == 0 {
		return jobsetv1alpha2.ReplicatedJob{}, fmt.Errorf("replica %s has no containers", rtype)
	}
	labels := d.PodLabels(job.GetName(), rtype, index)
	pod := *rs.Template.DeepCopy()
	pod.Labels = mergeLabels(pod.Labels, labels)
	if pod.Spec.Hostname == "" {
		pod.Spec.Hostname = ReplicaName(job.GetName(), rtype, index)
	}
	if d.Pod != nil {
		if err := d.Pod(job, PodInfo{Type: rtype, Index: index, ClusterDomain: clusterDomain}, &pod); err != nil {
			return jobsetv1alpha2.ReplicatedJob{}, fmt.Errorf("replicated job %s: %w", name, err)
		}
	}
	jobSpec := batchv1.JobSpec{
		Parallelism:    ptr.To[int32](1),
		Completions:    ptr.To[int32](1),
		CompletionMode: ptr.To(batchv1.NonIndexedCompletion),
		BackoffLimit:   ptr.To(ptr.Deref(job.JobRunPolicy().BackoffLimit, math.MaxInt32)),
	}
	switch rs.RestartPolicy {
	case kubeflowv1.RestartPolicyNever:
		pod.Spec.RestartPolicy = corev1.RestartPolicyNever
		jobSpec.BackoffLimit = ptr.To[int32](0)
	case kubeflowv1.RestartPolicyExitCode:
		pod.Spec.RestartPolicy = corev1.RestartPolicyNever
		jobSpec.PodFailurePolicy = exitCodePolicy(pod.Spec.Containers[ContainerIndex(&pod.Spec, d.Container)].Name)
	default: // OnFailure, Always
		pod.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	}
	jobSpec.Template = pod
	return jobsetv1alpha2.ReplicatedJob{
		Name:     name,
		Replicas: 1,
		Template: batchv1.JobTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(labels)},
			Spec:       jobSpec,
		},
	}, nil
}

// exitCodePolicy is v1's ExitCode restart policy as a Job pod failure
// policy: a permanent error (1-127) of the container fails the Job; a
// retryable one (128-255) replaces the pod, counted against backoffLimit.
func exitCodePolicy(container string) *batchv1.PodFailurePolicy {
	seq := func(lo, hi int32) []int32 {
		out := make([]int32, 0, hi-lo+1)
		for v := lo; v <= hi; v++ {
			out = append(out, v)
		}
		return out
	}
	return &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
		{Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
			ContainerName: ptr.To(container), Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: seq(1, 127)}},
		{Action: batchv1.PodFailurePolicyActionCount, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
			ContainerName: ptr.To(container), Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: seq(128, 255)}},
	}}
}

// mergeLabels returns base with add on top (v1's labels win over the template's).
func mergeLabels(base, add map[string]string) map[string]string {
	out := maps.Clone(base)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, add)
	return out
}
