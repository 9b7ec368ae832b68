package pytorchjob

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

// RuntimeKind is the Runtime.Kind of a runtime converted from a PyTorchJob.
const RuntimeKind = kubeflowv1.PyTorchJobKind

// ToRequest is what the pipeline is asked to run for a PyTorchJob: its
// identity, its suspension and, under a gang scheduler, the PodGroup's shape
// from runPolicy.schedulingPolicy. Everything else (the pods, v1's
// environment) is in the runtime from ToRuntime.
func ToRequest(job *kubeflowv1.PyTorchJob, gs GangScheduler) *runtime.Request {
	return &runtime.Request{
		Name:      job.Name,
		Namespace: job.Namespace,
		Labels:    job.Labels,
		Suspend:   ptr.Deref(job.Spec.RunPolicy.Suspend, false),
		Gang:      gangPolicy(job, gs),
		Paths:     paths,
	}
}

// paths are where a PyTorchJob holds what its request carries; its runtime
// is its replica specs.
var paths = runtime.Paths{
	Name:    field.NewPath("metadata", "name"),
	Labels:  field.NewPath("metadata", "labels"),
	Runtime: field.NewPath("spec", "pytorchReplicaSpecs"),
	Spec:    field.NewPath("spec"),
}

// ToRuntime converts a defaulted PyTorchJob into the runtime the pipeline
// starts from: a JobSet template with one replicated job per replica
// ("master", "worker-0", "worker-1", ...), each a one-pod Job, so that every
// pod has its static rank and v1's host name (see replicatedJob). Each pod
// template is the replica's own, labelled as v1 labelled pods, with v1's
// restart policy mapped onto a Job:
//
//   - OnFailure and Always: the pod restarts its containers (restartPolicy
//     OnFailure; a Job cannot use Always) until runPolicy.backoffLimit
//     restarts, without limit when it is unset, as in v1;
//   - Never: the first failure fails the job (Job backoffLimit 0);
//   - ExitCode: restartPolicy Never plus a pod failure policy on the pytorch
//     container: exit codes 1-127 fail the job at once, 128-255 (signals,
//     OOM kills) recreate the pod, counted against backoffLimit.
//
// The JobSet fails as soon as any Job fails (failurePolicy.maxRestarts 0), and
// succeeds when the Master succeeds (v1: the Master's success is the job's),
// or, without a Master, when every worker has, or for elastic jobs when any
// worker has.
//
// JobSets rendered by earlier versions ran the workers of an elastic job
// without a Master as one Indexed Job, "worker"; RoleOfReplicatedJob still
// reads them.
func ToRuntime(job *kubeflowv1.PyTorchJob) (*runtime.Runtime, error) {
	spec := jobsetv1alpha2.JobSetSpec{
		// The per-replica Services give pods their v1 DNS names; JobSet's own
		// headless Service (named after the job) is not needed.
		Network:       &jobsetv1alpha2.Network{EnableDNSHostnames: ptr.To(false)},
		FailurePolicy: &jobsetv1alpha2.FailurePolicy{MaxRestarts: 0},
		SuccessPolicy: &jobsetv1alpha2.SuccessPolicy{Operator: jobsetv1alpha2.OperatorAll},
	}
	if HasMaster(job) {
		rs := job.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeMaster]
		rj, err := replicatedJob(job, kubeflowv1.PyTorchJobReplicaTypeMaster, rs, MasterJob, 0)
		if err != nil {
			return nil, err
		}
		spec.ReplicatedJobs = append(spec.ReplicatedJobs, rj)
		spec.SuccessPolicy = &jobsetv1alpha2.SuccessPolicy{Operator: jobsetv1alpha2.OperatorAny, TargetReplicatedJobs: []string{MasterJob}}
	}
	if rs := job.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeWorker]; rs != nil {
		for i := range int(ptr.Deref(rs.Replicas, 1)) {
			rj, err := replicatedJob(job, kubeflowv1.PyTorchJobReplicaTypeWorker, rs, WorkerJob(i), i)
			if err != nil {
				return nil, err
			}
			spec.ReplicatedJobs = append(spec.ReplicatedJobs, rj)
		}
		if !HasMaster(job) && job.Spec.ElasticPolicy != nil {
			// v1: an elastic job without a Master succeeds once any worker has.
			spec.SuccessPolicy = &jobsetv1alpha2.SuccessPolicy{Operator: jobsetv1alpha2.OperatorAny}
		}
	}
	return &runtime.Runtime{
		Kind:       RuntimeKind,
		Name:       job.Name,
		UID:        job.UID,
		Generation: job.Generation,
		Spec: trainer.TrainingRuntimeSpec{Template: trainer.JobSetTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: SelectorLabels(job.Name)},
			Spec:       spec,
		}},
	}, nil
}

// replicatedJob builds the replicated job of one replica: a one-pod Job whose
// pod has v1's host name.
//
// v1 named the pod of replica i <job>-<type>-i, and a pod's host name is its
// name unless the template sets one, so that was its host name too. torchrun's
// c10d rendezvous relies on it: the agent whose host name is the endpoint's
// host (<job>-worker-0 by default) hosts the rendezvous store, every other
// agent connects to it; with no such host every agent waits for a store no one
// serves. An Indexed Job names its pods' hosts <Job>-<completion index>
// (<job>-worker-0-0 here), overriding the template, so the Job is NonIndexed
// and the template carries the host name (unless it sets its own, as v1 kept
// it).
func replicatedJob(job *kubeflowv1.PyTorchJob, rtype kubeflowv1.ReplicaType, rs *kubeflowv1.ReplicaSpec, name string, index int) (jobsetv1alpha2.ReplicatedJob, error) {
	if len(rs.Template.Spec.Containers) == 0 {
		return jobsetv1alpha2.ReplicatedJob{}, fmt.Errorf("replica %s has no containers", rtype)
	}
	// v1 gives job-role=master to the Master, or to worker 0 of a job without one.
	isMaster := rtype == kubeflowv1.PyTorchJobReplicaTypeMaster || (!HasMaster(job) && index == 0)
	labels := PodLabels(job.Name, rtype, index, isMaster)

	pod := *rs.Template.DeepCopy()
	pod.Labels = mergeLabels(pod.Labels, labels)
	if err := withEnv(job, rtype, index, &pod.Spec); err != nil {
		return jobsetv1alpha2.ReplicatedJob{}, fmt.Errorf("replicated job %s: %w", name, err)
	}
	if pod.Spec.Hostname == "" {
		pod.Spec.Hostname = ReplicaName(job.Name, rtype, index)
	}

	jobSpec := batchv1.JobSpec{
		Parallelism:    ptr.To[int32](1),
		Completions:    ptr.To[int32](1),
		CompletionMode: ptr.To(batchv1.NonIndexedCompletion),
		// Unset in v1 means no limit on restarts.
		BackoffLimit: ptr.To(ptr.Deref(job.Spec.RunPolicy.BackoffLimit, math.MaxInt32)),
	}
	switch rs.RestartPolicy {
	case kubeflowv1.RestartPolicyNever:
		pod.Spec.RestartPolicy = corev1.RestartPolicyNever
		jobSpec.BackoffLimit = ptr.To[int32](0)
	case kubeflowv1.RestartPolicyExitCode:
		pod.Spec.RestartPolicy = corev1.RestartPolicyNever
		jobSpec.PodFailurePolicy = exitCodePolicy()
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

// exitCodePolicy is v1's ExitCode restart policy as a Job pod failure policy
// (which requires pod restartPolicy Never): a permanent error (1-127) of the
// pytorch container fails the Job; a retryable one (128-255: killed by a
// signal, e.g. OOM-killed or preempted) lets the Job replace the pod. Count
// rather than Ignore, so that runPolicy.backoffLimit bounds the retries as it
// did in v1 (unset: no bound).
func exitCodePolicy() *batchv1.PodFailurePolicy {
	seq := func(lo, hi int32) []int32 {
		out := make([]int32, 0, hi-lo+1)
		for v := lo; v <= hi; v++ {
			out = append(out, v)
		}
		return out
	}
	container := ptr.To(kubeflowv1.PyTorchJobDefaultContainerName)
	return &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
		{Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
			ContainerName: container, Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: seq(1, 127)}},
		{Action: batchv1.PodFailurePolicyActionCount, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
			ContainerName: container, Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: seq(128, 255)}},
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
