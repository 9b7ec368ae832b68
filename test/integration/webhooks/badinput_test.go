package webhooks

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

func patchContainer(rjob, container string, env ...corev1.EnvVar) []trainer.RuntimePatch {
	return []trainer.RuntimePatch{{
		Manager: "example.com/user",
		TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{
			ReplicatedJobs: []trainer.ReplicatedJobPatch{{Name: rjob, Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{
				Template: &trainer.PodTemplatePatch{Spec: &trainer.PodSpecPatch{Containers: []trainer.ContainerPatch{{Name: container, Env: env}}}},
			}}}},
		}}},
	}}
}

func override(rjob, container string, env ...corev1.EnvVar) []trainer.PodTemplateOverride {
	o := trainer.PodTemplateOverride{TargetJobs: []trainer.PodTemplateOverrideTargetJob{{Name: rjob}}}
	if container != "" {
		o.Spec = &trainer.PodTemplateSpecOverride{Containers: []trainer.ContainerOverride{{Name: container, Env: env}}}
	}
	return []trainer.PodTemplateOverride{o}
}

var debug = corev1.EnvVar{Name: "DEBUG", Value: "1"}

// Every bad TrainJob is rejected at admission, by the API server's schema and CEL
// rules or by Trainyard's webhook, with the exact field and a message a user
// understands.
func TestBadTrainJobsAreRejected(t *testing.T) {
	ns := newNamespace(t)
	newRuntime(t, ns, "rt")
	// An MPI runtime that runs the launcher as a node but has no launcher job.
	mpi := runtimeSpec()
	mpi.MLPolicy.Torch, mpi.MLPolicy.MPI = nil, &trainer.MPIMLPolicySource{RunLauncherAsNode: ptr.To(true)}
	require.NoError(t, env.Client.Create(ctx(), &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mpi"}, Spec: mpi}))

	cases := []struct {
		name   string
		job    *trainer.TrainJob
		field  string
		detail string
	}{
		{"runtime missing", job(ns, "a", func(j *trainer.TrainJob) { j.Spec.RuntimeRef.Name = "nope" }),
			"spec.runtimeRef.name", `Not found: "nope"`},
		{"runtime of an unknown kind", job(ns, "a", func(j *trainer.TrainJob) { j.Spec.RuntimeRef.Kind = ptr.To("Deployment") }),
			"spec.runtimeRef.kind", `Unsupported value: "Deployment"`},
		{"runtime in an unknown group", job(ns, "a", func(j *trainer.TrainJob) { j.Spec.RuntimeRef.APIGroup = ptr.To("example.com") }),
			"spec.runtimeRef.kind", "Unsupported value"},
		{"reserved OpenMPI env on an MPI runtime", job(ns, "a", func(j *trainer.TrainJob) {
			j.Spec.RuntimeRef.Name = "mpi"
			j.Spec.Trainer.Env = []corev1.EnvVar{debug, {Name: "OMPI_MCA_orte_set_default_slots", Value: "8"}}
		}), "spec.trainer.env", "must not have reserved envs, invalid envs configured: [OMPI_MCA_orte_set_default_slots]"},
		{"several MPI nodes with the launcher as a node but no launcher job", job(ns, "a", func(j *trainer.TrainJob) {
			j.Spec.RuntimeRef.Name = "mpi"
			j.Spec.Trainer.NumNodes = ptr.To[int32](2)
		}), "spec.trainer.numNodes", "must have 1 when MPI trainingRuntime with enabled runLauncherAsNode does not have either launcher and node"},
		{"reserved env PET_NNODES", job(ns, "a", func(j *trainer.TrainJob) {
			j.Spec.Trainer.Env = []corev1.EnvVar{debug, {Name: "PET_NNODES", Value: "3"}}
		}),
			"spec.trainer.env[1].name", "is set by Trainyard or torchrun"},
		{"reserved env MASTER_ADDR", job(ns, "a", func(j *trainer.TrainJob) { j.Spec.Trainer.Env = []corev1.EnvVar{{Name: "MASTER_ADDR", Value: "x"}} }),
			"spec.trainer.env[0].name", "is set by Trainyard or torchrun"},
		{"reserved env WORLD_SIZE", job(ns, "a", func(j *trainer.TrainJob) { j.Spec.Trainer.Env = []corev1.EnvVar{{Name: "WORLD_SIZE", Value: "2"}} }),
			"spec.trainer.env[0].name", "is set by Trainyard or torchrun"},
		{"reserved env RANK", job(ns, "a", func(j *trainer.TrainJob) { j.Spec.Trainer.Env = []corev1.EnvVar{{Name: "RANK", Value: "0"}} }),
			"spec.trainer.env[0].name", "is set by Trainyard or torchrun"},
		{"numNodes -1 (0 is allowed since Kubeflow Trainer v2.4)", job(ns, "a", func(j *trainer.TrainJob) { j.Spec.Trainer.NumNodes = ptr.To[int32](-1) }),
			"spec.trainer.numNodes", "should be greater than or equal to 0"},
		{"PRRTE's reserved env on an MPI runtime (Open MPI 5, Kubeflow Trainer v2.4)", job(ns, "a", func(j *trainer.TrainJob) {
			j.Spec.RuntimeRef.Name = "mpi"
			j.Spec.Trainer.Env = []corev1.EnvVar{debug, {Name: "PRTE_MCA_prte_keep_fqdn_hostnames", Value: "true"}}
		}), "spec.trainer.env", "must not have reserved envs, invalid envs configured: [PRTE_MCA_prte_keep_fqdn_hostnames]"},
		{"numProcPerNode 0", job(ns, "a", func(j *trainer.TrainJob) { j.Spec.Trainer.NumProcPerNode = ptr.To(intstr.FromInt32(0)) }),
			"spec.trainer.numProcPerNode", "must be an integer >= 1 or one of auto, cpu, gpu"},
		{"numProcPerNode word", job(ns, "a", func(j *trainer.TrainJob) { j.Spec.Trainer.NumProcPerNode = ptr.To(intstr.FromString("all")) }),
			"spec.trainer.numProcPerNode", "must be an integer >= 1 or one of auto, cpu, gpu"},
		{"numProcPerNode gpu without GPUs", job(ns, "a", func(j *trainer.TrainJob) { j.Spec.Trainer.NumProcPerNode = ptr.To(intstr.FromString("gpu")) }),
			"spec.trainer.numProcPerNode", "the trainer node requests no GPUs"},
		{"requests above limits", job(ns, "a", func(j *trainer.TrainJob) {
			j.Spec.Trainer.ResourcesPerNode = &corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}
		}), "spec.trainer.resourcesPerNode.requests[cpu]", "must be less than or equal to the cpu limit 2 (after merging with the runtime's resources)"},
		{"override of a missing replicated job", job(ns, "a", func(j *trainer.TrainJob) { j.Spec.PodTemplateOverrides = override("launcher", "") }),
			"spec.podTemplateOverrides[0].targetJobs[0].name", `Not found: "launcher"`},
		{"override of a missing container", job(ns, "a", func(j *trainer.TrainJob) { j.Spec.PodTemplateOverrides = override("node", "sidecar", debug) }),
			"spec.podTemplateOverrides[0].spec.containers[0].name", `Not found: "sidecar"`},
		{"runtime patch of a missing replicated job", job(ns, "a", func(j *trainer.TrainJob) { j.Spec.RuntimePatches = patchContainer("launcher", "node") }),
			"spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].name", `Not found: "launcher"`},
		{"runtime patch of a missing container", job(ns, "a", func(j *trainer.TrainJob) { j.Spec.RuntimePatches = patchContainer("node", "sidecar", debug) }),
			"spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec.containers[0].name", `Not found: "sidecar"`},
		{"override env on the node container", job(ns, "a", func(j *trainer.TrainJob) { j.Spec.PodTemplateOverrides = override("node", "node", debug) }),
			"spec.podTemplateOverrides[0].spec.containers[0].env", `must not set env on the "node" container; use spec.trainer.env`},
		{"runtime patch env on the node container", job(ns, "a", func(j *trainer.TrainJob) { j.Spec.RuntimePatches = patchContainer("node", "node", debug) }),
			"spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec.containers[0].env", "use spec.trainer.env"},
		{"runtime patch env on the dataset initializer", job(ns, "a", func(j *trainer.TrainJob) {
			j.Spec.RuntimePatches = patchContainer("dataset-initializer", "dataset-initializer", debug)
		}), "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec.containers[0].env", "use spec.initializer.dataset.env"},
		{"initializer the runtime lacks", job(ns, "a", func(j *trainer.TrainJob) {
			j.Spec.Initializer = &trainer.Initializer{Model: &trainer.ModelInitializer{StorageUri: ptr.To("hf://org/model")}}
		}), "spec.runtimeRef", "must have model-initializer job when trainJob is configured with input modelConfig"},
		{"storageUri without a scheme", job(ns, "a", func(j *trainer.TrainJob) {
			j.Spec.Initializer = &trainer.Initializer{Dataset: &trainer.DatasetInitializer{StorageUri: ptr.To("just-a-path")}}
		}), "spec.initializer.dataset.storageUri", "must be empty or a URI of the form scheme://"},
		{"name too long for pod host names", job(ns, strings.Repeat("a", 50), nil),
			"metadata.name", "must be no more than 33 characters on this runtime: pod host names <name>-dataset-initializer-0-0-xxxxx must fit in 63 characters"},
		{"name starting with a digit", job(ns, "7up", nil),
			"metadata.name", "must start with a lowercase letter: it becomes part of pod host names"},
		{"name with an underscore", job(ns, "my_job", nil),
			"metadata.name", "a lowercase RFC 1123 subdomain must consist of"},
		{"name with a dot", job(ns, "my.job", nil),
			"metadata.name", "a DNS-1035 label must consist of lower case alphanumeric characters or '-'"},
		{"managedBy of an unknown controller", job(ns, "a", func(j *trainer.TrainJob) { j.Spec.ManagedBy = ptr.To("example.com/mine") }),
			"spec.managedBy", "managedBy must be trainer.kubeflow.org/trainjob-controller or kueue.x-k8s.io/multikueue"},
		{"activeDeadlineSeconds 0", job(ns, "a", func(j *trainer.TrainJob) { j.Spec.ActiveDeadlineSeconds = ptr.To[int64](0) }),
			"spec.activeDeadlineSeconds", "should be greater than or equal to 1"},
		{"runtimeRef without a name", job(ns, "a", func(j *trainer.TrainJob) { j.Spec.RuntimeRef.Name = "" }),
			"spec.runtimeRef.name", "Required value"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := env.Client.Create(ctx(), tc.job)
			requireFieldError(t, err, tc.field, tc.detail)
		})
	}
}

// requireFieldError asserts an Invalid API error that names the field with the detail.
func requireFieldError(t *testing.T, err error, field, detail string) {
	t.Helper()
	require.Error(t, err, "want a rejection at %s", field)
	require.True(t, apierrors.IsInvalid(err) || apierrors.IsForbidden(err), "want Invalid, got %v", err)
	msg := err.Error()
	require.True(t, strings.Contains(msg, field+":"), "error does not name field %s:\n%s", field, msg)
	require.True(t, strings.Contains(msg, detail), "error does not say %q:\n%s", detail, msg)
}

// Overrides change only while the job is suspended; the rest is immutable.
func TestBadTrainJobUpdatesAreRejected(t *testing.T) {
	ns := newNamespace(t)
	newRuntime(t, ns, "rt")
	require.NoError(t, env.Client.Create(ctx(), job(ns, "running", nil)))
	require.NoError(t, env.Client.Create(ctx(), job(ns, "queued", func(j *trainer.TrainJob) { j.Spec.Suspend = ptr.To(true) })))

	update := func(name string, mutate func(*trainer.TrainJob)) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var j trainer.TrainJob
			require.NoError(t, env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, &j))
			mutate(&j)
			return env.Client.Update(ctx(), &j)
		})
	}
	selector := func(j *trainer.TrainJob) {
		j.Spec.PodTemplateOverrides = []trainer.PodTemplateOverride{{
			TargetJobs: []trainer.PodTemplateOverrideTargetJob{{Name: "node"}},
			Spec:       &trainer.PodTemplateSpecOverride{NodeSelector: map[string]string{"pool": "a"}},
		}}
	}
	cases := []struct {
		name, job     string
		mutate        func(*trainer.TrainJob)
		field, detail string
	}{
		{"overrides of a running job", "running", selector, "spec.podTemplateOverrides", "may change only while the TrainJob is suspended"},
		{"runtime patches of a running job", "running", func(j *trainer.TrainJob) { j.Spec.RuntimePatches = patchContainer("node", "logger", debug) },
			"spec.runtimePatches", "may change only while the TrainJob is suspended"},
		{"labels of a running job", "running", func(j *trainer.TrainJob) { j.Spec.Labels = map[string]string{"a": "b"} },
			"spec.labels", "may change only while the TrainJob is suspended"},
		{"trainer", "queued", func(j *trainer.TrainJob) { j.Spec.Trainer.Image = ptr.To("example.com/other:v2") }, "spec.trainer", "field is immutable"},
		{"runtimeRef", "queued", func(j *trainer.TrainJob) { j.Spec.RuntimeRef.Name = "other" }, "spec.runtimeRef", "field is immutable"},
		{"managedBy", "queued", func(j *trainer.TrainJob) { j.Spec.ManagedBy = ptr.To(trainer.MultiKueueControllerName) }, "spec.managedBy", "field is immutable"},
		{"an override of a missing container while suspended", "queued", func(j *trainer.TrainJob) { j.Spec.PodTemplateOverrides = override("node", "nope", debug) },
			"spec.podTemplateOverrides[0].spec.containers[0].name", `Not found: "nope"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			requireFieldError(t, update(tc.job, tc.mutate), tc.field, tc.detail)
		})
	}

	// What a queue does on admission is allowed: change overrides while suspended,
	// and change them together with resuming.
	require.NoError(t, update("queued", selector))
	require.NoError(t, update("queued", func(j *trainer.TrainJob) {
		j.Spec.PodTemplateOverrides[0].Spec.NodeSelector["pool"] = "b"
		j.Spec.Suspend = ptr.To(false)
	}))
	// And suspending a running job.
	require.NoError(t, update("running", func(j *trainer.TrainJob) { j.Spec.Suspend = ptr.To(true) }))
}

// Runtimes that no TrainJob could run on are rejected.
func TestBadRuntimesAreRejected(t *testing.T) {
	ns := newNamespace(t)
	cases := []struct {
		name          string
		mutate        func(*trainer.TrainingRuntimeSpec)
		field, detail string
	}{
		{"no trainer job", func(s *trainer.TrainingRuntimeSpec) {
			delete(s.Template.Spec.ReplicatedJobs[1].Template.Labels, trainer.AncestorLabel)
		},
			"spec.template.spec.replicatedJobs", "one replicated job must be labelled trainer.kubeflow.org/trainjob-ancestor-step=trainer"},
		{"trainer job with replicas 2", func(s *trainer.TrainingRuntimeSpec) { s.Template.Spec.ReplicatedJobs[1].Replicas = 2 },
			"spec.template.spec.replicatedJobs[1].replicas", "must be 1 for the trainer job"},
		{"trainer job without a node container", func(s *trainer.TrainingRuntimeSpec) {
			s.Template.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.Containers[0].Name = "main"
		}, "spec.template.spec.replicatedJobs[1].template.spec.template.spec.containers", `must have a container named "node"`},
		{"two trainer jobs", func(s *trainer.TrainingRuntimeSpec) {
			s.Template.Spec.ReplicatedJobs[0].Template.Labels[trainer.AncestorLabel] = trainer.AncestorTrainer
			s.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].Name = "node"
		}, "spec.template.spec.replicatedJobs[1].template.metadata.labels[trainer.kubeflow.org/trainjob-ancestor-step]", "Duplicate value"},
		{"initializer without its container", func(s *trainer.TrainingRuntimeSpec) {
			s.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].Name = "fetch"
		}, "spec.template.spec.replicatedJobs[0].template.spec.template.spec.containers", `must have a container named "dataset-initializer"`},
		{"unknown ancestor step", func(s *trainer.TrainingRuntimeSpec) {
			s.Template.Spec.ReplicatedJobs[0].Template.Labels[trainer.AncestorLabel] = "evaluator"
		},
			"spec.template.spec.replicatedJobs[0].template.metadata.labels[trainer.kubeflow.org/trainjob-ancestor-step]", `Unsupported value: "evaluator"`},
		{"two framework policies", func(s *trainer.TrainingRuntimeSpec) { s.MLPolicy.MPI = &trainer.MPIMLPolicySource{} },
			"spec.mlPolicy", "only one of torch, mpi, jax, xgboost or flux can be set"},
		{"numNodes 0", func(s *trainer.TrainingRuntimeSpec) { s.MLPolicy.NumNodes = ptr.To[int32](0) },
			"spec.mlPolicy.numNodes", "should be greater than or equal to 1"},
		{"MPI numProcPerNode 0 (Kubeflow Trainer v2.4)", func(s *trainer.TrainingRuntimeSpec) {
			s.MLPolicy.Torch, s.MLPolicy.MPI = nil, &trainer.MPIMLPolicySource{NumProcPerNode: ptr.To[int32](0)}
		}, "spec.mlPolicy.mpi.numProcPerNode", "should be greater than or equal to 1"},
		{"a replicated job name of 21 characters (Kubeflow Trainer v2.4)", func(s *trainer.TrainingRuntimeSpec) {
			s.Template.Spec.ReplicatedJobs[1].Name = "trainer-of-21-chars-"
			s.Template.Spec.ReplicatedJobs[1].Name += "x"
		}, "spec.template.spec.replicatedJobs[1].name", `Invalid value: "trainer-of-21-chars-x": must be no more than 20 characters`},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := runtimeSpec()
			tc.mutate(&spec)
			err := env.Client.Create(ctx(), &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rt-" + string(rune('a'+i))}, Spec: spec})
			requireFieldError(t, err, tc.field, tc.detail)
			cerr := env.Client.Create(ctx(), &trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "crt-" + string(rune('a'+i))}, Spec: spec})
			requireFieldError(t, cerr, tc.field, tc.detail)
		})
	}
}
