package mpi_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
	"github.com/trainyard/trainyard/pkg/runtime/plugins"
	rtt "github.com/trainyard/trainyard/test/util/rtt"
)

func TestValidate(t *testing.T) {
	reservedEnv := []corev1.EnvVar{
		rtt.Env("OMPI_MCA_plm_rsh_args", "-v"), rtt.Env("OK", "1"), rtt.Env("OMPI_MCA_orte_default_hostfile", "/h"),
	}
	withoutNodeJob := func(rt *runtime.Runtime) {
		rt.Spec.Template.Spec.ReplicatedJobs = rt.Spec.Template.Spec.ReplicatedJobs[1:]
	}
	cases := map[string]struct {
		rt   func(*runtime.Runtime)
		job  *trainer.TrainJob
		want field.ErrorList
	}{
		"fine": {
			job: rtt.MakeTrainJob("ns", "job").NumNodes(4).Env(rtt.Env("OMPI_MCA_btl", "tcp,self")).Obj(),
		},
		"OpenMPI's reserved variables": {
			job: rtt.MakeTrainJob("ns", "job").Env(reservedEnv...).Obj(),
			want: field.ErrorList{field.Invalid(field.NewPath("spec", "trainer", "env"), reservedEnv,
				"must not have reserved envs, invalid envs configured: [OMPI_MCA_orte_default_hostfile OMPI_MCA_plm_rsh_args]")},
		},
		"Open MPI 5's (PRRTE) variables are reserved too": {
			job: rtt.MakeTrainJob("ns", "job").Env(rtt.Env("PRTE_MCA_plm_ssh_args", "-v"), rtt.Env("PRTE_MCA_prte_keep_fqdn_hostnames", "true"),
				rtt.Env("PRTE_MCA_prte_default_hostfile", "/h"), rtt.Env("PRTE_MCA_prte_set_default_slots", "2"), rtt.Env("PRTE_MCA_rmaps_default_mapping_policy", "node")).Obj(),
			want: field.ErrorList{field.Invalid(field.NewPath("spec", "trainer", "env"), []corev1.EnvVar{
				rtt.Env("PRTE_MCA_plm_ssh_args", "-v"), rtt.Env("PRTE_MCA_prte_keep_fqdn_hostnames", "true"),
				rtt.Env("PRTE_MCA_prte_default_hostfile", "/h"), rtt.Env("PRTE_MCA_prte_set_default_slots", "2"), rtt.Env("PRTE_MCA_rmaps_default_mapping_policy", "node")},
				"must not have reserved envs, invalid envs configured: [PRTE_MCA_plm_ssh_args PRTE_MCA_prte_default_hostfile PRTE_MCA_prte_keep_fqdn_hostnames PRTE_MCA_prte_set_default_slots]")},
		},
		"a runtime stored with numProcPerNode 0 (before v2.4's minimum)": {
			rt: func(rt *runtime.Runtime) {
				rt.Spec.MLPolicy.MPI.NumProcPerNode = ptr.To[int32](0)
			},
			job: rtt.MakeTrainJob("ns", "job").Obj(),
			want: field.ErrorList{field.Invalid(field.NewPath("spec", "runtimeRef"), "deepspeed-distributed",
				`runtime ClusterTrainingRuntime "deepspeed-distributed": spec.mlPolicy.mpi.numProcPerNode: Invalid value: 0: must be at least 1`)},
		},
		"zero nodes": {
			job: rtt.MakeTrainJob("ns", "job").NumNodes(0).Obj(),
		},
		"several nodes with the launcher as a node but no node job": {
			rt:  withoutNodeJob,
			job: rtt.MakeTrainJob("ns", "job").NumNodes(2).Obj(),
			want: field.ErrorList{field.Invalid(field.NewPath("spec", "trainer", "numNodes"), int32(2),
				"must have 1 when MPI trainingRuntime with enabled runLauncherAsNode does not have either launcher and node")},
		},
		"one node without a node job is fine": {
			rt:  withoutNodeJob,
			job: rtt.MakeTrainJob("ns", "job").NumNodes(1).Obj(),
		},
		"an implementation other than OpenMPI": {
			rt: func(rt *runtime.Runtime) {
				rt.Spec.MLPolicy.MPI.MPIImplementation = ptr.To(trainer.MPIImplementation(""))
			},
			job: rtt.MakeTrainJob("ns", "job").Obj(),
			want: field.ErrorList{field.Invalid(field.NewPath("spec", "runtimeRef"), "deepspeed-distributed",
				`MPI implementation for "" is not supported: runtime ClusterTrainingRuntime "deepspeed-distributed" must use mpiImplementation OpenMPI`)},
		},
		"numProcPerNode gpu without GPUs": {
			job: rtt.MakeTrainJob("ns", "job").NumProcPerNode(intstr.FromString("gpu")).Obj(),
			want: field.ErrorList{field.Invalid(field.NewPath("spec", "trainer", "numProcPerNode"), "gpu",
				"the MPI nodes request no GPUs (set resourcesPerNode with a GPU resource, or use an integer)")},
		},
	}
	fw, err := plugins.NewFramework()
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rt := loadRuntime(t, "deepspeed-distributed")
			if tc.rt != nil {
				tc.rt(rt)
			}
			got := fw.Validate(rt, runtime.TrainJobRequest(tc.job))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Validate (-want +got):\n%s", diff)
			}
			// The controller rejects the same input (status error with webhooks off).
			_, err := fw.Build(runtime.TrainJobRequest(tc.job), rt)
			if (err != nil) != (len(tc.want) > 0) || (err != nil && !framework.IsInvalid(err)) {
				t.Errorf("Build error %v, want an invalid-input error: %v", err, len(tc.want) > 0)
			}
		})
	}
}
