package pytorchjob

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
)

func TestEnv(t *testing.T) {
	master, worker := kubeflowv1.PyTorchJobReplicaTypeMaster, kubeflowv1.PyTorchJobReplicaTypeWorker
	cases := map[string]struct {
		job   *kubeflowv1.PyTorchJob
		rtype kubeflowv1.ReplicaType
		index int
		want  []corev1.EnvVar
	}{
		// The worked example of the v1 facts: Master(1) + Worker(1), nprocPerNode auto.
		"mnist master": {job: mnist(1), rtype: master, index: 0, want: env(
			"PYTHONUNBUFFERED", "1", "MASTER_PORT", "23456", "PET_MASTER_PORT", "23456",
			"MASTER_ADDR", "mnist-master-0", "PET_MASTER_ADDR", "mnist-master-0",
			"WORLD_SIZE", "2", "RANK", "0", "PET_NODE_RANK", "0", "PET_NPROC_PER_NODE", "auto", "PET_NNODES", "2")},
		"mnist worker 0 has rank 1": {job: mnist(1), rtype: worker, index: 0, want: env(
			"PYTHONUNBUFFERED", "1", "MASTER_PORT", "23456", "PET_MASTER_PORT", "23456",
			"MASTER_ADDR", "mnist-master-0", "PET_MASTER_ADDR", "mnist-master-0",
			"WORLD_SIZE", "2", "RANK", "1", "PET_NODE_RANK", "1", "PET_NPROC_PER_NODE", "auto", "PET_NNODES", "2")},
		"integer nprocPerNode multiplies WORLD_SIZE, not RANK; the master's port is used": {
			job: mnist(3, func(j *kubeflowv1.PyTorchJob) {
				j.Spec.NprocPerNode = ptr.To("4")
				j.Spec.PyTorchReplicaSpecs[master].Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "pytorchjob-port", ContainerPort: 3333}}
			}),
			rtype: worker, index: 2, want: env(
				"PYTHONUNBUFFERED", "1", "MASTER_PORT", "3333", "PET_MASTER_PORT", "3333",
				"MASTER_ADDR", "mnist-master-0", "PET_MASTER_ADDR", "mnist-master-0",
				"WORLD_SIZE", "16", "RANK", "3", "PET_NODE_RANK", "3", "PET_NPROC_PER_NODE", "4", "PET_NNODES", "4")},
		"worker-only, not elastic: no master variables": {
			job:   mnist(2, func(j *kubeflowv1.PyTorchJob) { delete(j.Spec.PyTorchReplicaSpecs, master) }),
			rtype: worker, index: 1, want: env("PYTHONUNBUFFERED", "1", "PET_NPROC_PER_NODE", "auto", "PET_NNODES", "2")},
		"elastic: c10d at worker 0, min:max nodes": {
			job: elastic(4), rtype: worker, index: -1, want: env(
				"PYTHONUNBUFFERED", "1", "PET_NPROC_PER_NODE", "auto",
				"PET_RDZV_ENDPOINT", "mnist-worker-0:23456", "PET_RDZV_BACKEND", "c10d", "PET_NNODES", "1:4", "PET_MAX_RESTARTS", "3")},
		"elastic: every rendezvous setting, deprecated nProcPerNode": {
			job: elastic(2, func(j *kubeflowv1.PyTorchJob) {
				ep := j.Spec.ElasticPolicy
				ep.RDZVHost, ep.RDZVPort, ep.RDZVBackend, ep.RDZVID = ptr.To("etcd.infra"), ptr.To[int32](2379), ptr.To(kubeflowv1.BackendETCDV2), ptr.To("run-7")
				ep.RDZVConf = []kubeflowv1.RDZVConf{{Key: "timeout", Value: "900"}, {Key: "protocol", Value: "https"}}
				ep.Standalone, ep.NProcPerNode, ep.MaxRestarts = ptr.To(true), ptr.To[int32](8), nil
			}),
			rtype: worker, index: -1, want: env(
				"PYTHONUNBUFFERED", "1",
				"PET_RDZV_ENDPOINT", "etcd.infra:2379", "PET_RDZV_BACKEND", "etcd-v2", "PET_NNODES", "1:2",
				"PET_NPROC_PER_NODE", "8", "PET_RDZV_ID", "run-7", "PET_RDZV_CONF", "timeout=900,protocol=https", "PET_STANDALONE", "")},
		"elastic with a Master: ranks and rendezvous": {
			job: elastic(2, func(j *kubeflowv1.PyTorchJob) {
				j.Spec.PyTorchReplicaSpecs[master] = replica(1, kubeflowv1.RestartPolicyOnFailure)
			}),
			rtype: worker, index: 1, want: env(
				"PYTHONUNBUFFERED", "1", "MASTER_PORT", "23456", "PET_MASTER_PORT", "23456",
				"MASTER_ADDR", "mnist-master-0", "PET_MASTER_ADDR", "mnist-master-0",
				"WORLD_SIZE", "3", "RANK", "2", "PET_NODE_RANK", "2", "PET_NPROC_PER_NODE", "auto",
				"PET_RDZV_ENDPOINT", "mnist-worker-0:23456", "PET_RDZV_BACKEND", "c10d", "PET_NNODES", "1:2", "PET_MAX_RESTARTS", "3")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Env(Defaulted(tc.job), tc.rtype, tc.index)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
		})
	}
}
