package pytorchjob

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
)

// withEnv gives every container of a replica's pod the environment
// training-operator v1.9 gave it, appended after the container's own
// variables in v1's order. It is part of converting the job into its runtime:
// v1's environment follows from the v1 spec alone, as a runtime template's
// does from the runtime.
func withEnv(job *kubeflowv1.PyTorchJob, rtype kubeflowv1.ReplicaType, index int, pod *corev1.PodSpec) error {
	env, err := Env(job, rtype, index)
	if err != nil {
		return err
	}
	for c := range pod.Containers {
		pod.Containers[c].Env = append(pod.Containers[c].Env, env...)
	}
	return nil
}

// Env is v1's environment for a pod of role rtype with replica index index (-1
// for none, as the shared worker jobs of earlier versions had; only valid
// without a Master, where v1 sets no rank either).
//
// In order: PYTHONUNBUFFERED=1; with a Master, MASTER_PORT, PET_MASTER_PORT,
// MASTER_ADDR, PET_MASTER_ADDR (the Master's Service), WORLD_SIZE (all
// replicas times nprocPerNode, or times 1 when it is not an integer), RANK and
// PET_NODE_RANK (0 for the Master, i+1 for worker i); PET_NPROC_PER_NODE;
// then the elastic rendezvous variables, or PET_NNODES = all replicas.
func Env(job *kubeflowv1.PyTorchJob, rtype kubeflowv1.ReplicaType, index int) ([]corev1.EnvVar, error) {
	env := []corev1.EnvVar{{Name: "PYTHONUNBUFFERED", Value: "1"}}
	total := Replicas(job, kubeflowv1.PyTorchJobReplicaTypeMaster) + Replicas(job, kubeflowv1.PyTorchJobReplicaTypeWorker)
	if HasMaster(job) {
		port, err := Port(job, kubeflowv1.PyTorchJobReplicaTypeMaster)
		if err != nil {
			return nil, err
		}
		addr := ReplicaName(job.Name, kubeflowv1.PyTorchJobReplicaTypeMaster, 0)
		if index < 0 {
			return nil, fmt.Errorf("a %s pod of a job with a Master needs a replica index", rtype)
		}
		rank := index
		if rtype == kubeflowv1.PyTorchJobReplicaTypeWorker {
			rank = index + 1
		}
		env = append(env,
			corev1.EnvVar{Name: "MASTER_PORT", Value: strconv.Itoa(int(port))},
			corev1.EnvVar{Name: "PET_MASTER_PORT", Value: strconv.Itoa(int(port))},
			corev1.EnvVar{Name: "MASTER_ADDR", Value: addr},
			corev1.EnvVar{Name: "PET_MASTER_ADDR", Value: addr},
			corev1.EnvVar{Name: "WORLD_SIZE", Value: strconv.Itoa(int(total) * nprocInt(job))},
			corev1.EnvVar{Name: "RANK", Value: strconv.Itoa(rank)},
			corev1.EnvVar{Name: "PET_NODE_RANK", Value: strconv.Itoa(rank)},
		)
	}
	if n := job.Spec.NprocPerNode; n != nil {
		env = append(env, corev1.EnvVar{Name: "PET_NPROC_PER_NODE", Value: *n})
	}
	if ep := job.Spec.ElasticPolicy; ep != nil {
		elastic, err := elasticEnv(job, ep)
		if err != nil {
			return nil, err
		}
		env = append(env, elastic...)
	} else {
		env = append(env, corev1.EnvVar{Name: "PET_NNODES", Value: strconv.Itoa(int(total))})
	}
	return env, nil
}

// elasticEnv is torchrun's rendezvous configuration, in v1's order.
func elasticEnv(job *kubeflowv1.PyTorchJob, ep *kubeflowv1.ElasticPolicy) ([]corev1.EnvVar, error) {
	host := ReplicaName(job.Name, kubeflowv1.PyTorchJobReplicaTypeWorker, 0)
	if ep.RDZVHost != nil {
		host = *ep.RDZVHost
	}
	var port int32
	if ep.RDZVPort != nil {
		port = *ep.RDZVPort
	} else {
		p, err := Port(job, kubeflowv1.PyTorchJobReplicaTypeWorker)
		if err != nil {
			return nil, err
		}
		port = p
	}
	backend := kubeflowv1.BackendC10D
	if ep.RDZVBackend != nil {
		backend = *ep.RDZVBackend
	}
	nnodes := strconv.Itoa(int(Replicas(job, kubeflowv1.PyTorchJobReplicaTypeWorker)))
	if ep.MinReplicas != nil || ep.MaxReplicas != nil {
		lo, hi := ep.MinReplicas, ep.MaxReplicas
		if lo == nil {
			lo = hi
		}
		if hi == nil {
			hi = lo
		}
		nnodes = fmt.Sprintf("%d:%d", *lo, *hi)
	}
	env := []corev1.EnvVar{
		{Name: "PET_RDZV_ENDPOINT", Value: fmt.Sprintf("%s:%d", host, port)},
		{Name: "PET_RDZV_BACKEND", Value: string(backend)},
		{Name: "PET_NNODES", Value: nnodes},
	}
	if ep.MaxRestarts != nil {
		env = append(env, corev1.EnvVar{Name: "PET_MAX_RESTARTS", Value: strconv.Itoa(int(*ep.MaxRestarts))})
	}
	if ep.NProcPerNode != nil {
		env = append(env, corev1.EnvVar{Name: "PET_NPROC_PER_NODE", Value: strconv.Itoa(int(*ep.NProcPerNode))})
	}
	if ep.RDZVID != nil {
		env = append(env, corev1.EnvVar{Name: "PET_RDZV_ID", Value: *ep.RDZVID})
	}
	if len(ep.RDZVConf) > 0 {
		kv := make([]string, 0, len(ep.RDZVConf))
		for _, c := range ep.RDZVConf {
			kv = append(kv, c.Key+"="+c.Value)
		}
		env = append(env, corev1.EnvVar{Name: "PET_RDZV_CONF", Value: strings.Join(kv, ",")})
	}
	if ep.Standalone != nil && *ep.Standalone {
		env = append(env, corev1.EnvVar{Name: "PET_STANDALONE", Value: ""})
	}
	return env, nil
}

// nprocInt is spec.nprocPerNode as a number for WORLD_SIZE: 1 unless it is an
// integer (with "auto", torchrun decides, and WORLD_SIZE is only meaningful
// for one process per pod, as in v1).
func nprocInt(job *kubeflowv1.PyTorchJob) int {
	if job.Spec.NprocPerNode == nil {
		return 1
	}
	if n, err := strconv.Atoi(*job.Spec.NprocPerNode); err == nil {
		return n
	}
	return 1
}

// Port is the containerPort of pytorchjob-port on the pytorch container of a role.
func Port(job *kubeflowv1.PyTorchJob, rtype kubeflowv1.ReplicaType) (int32, error) {
	if rs := job.Spec.PyTorchReplicaSpecs[rtype]; rs != nil {
		for _, c := range rs.Template.Spec.Containers {
			if c.Name != kubeflowv1.PyTorchJobDefaultContainerName {
				continue
			}
			for _, p := range c.Ports {
				if p.Name == kubeflowv1.PyTorchJobDefaultPortName {
					return p.ContainerPort, nil
				}
			}
		}
	}
	return 0, fmt.Errorf("the %s container of %s has no port named %s", kubeflowv1.PyTorchJobDefaultContainerName, rtype, kubeflowv1.PyTorchJobDefaultPortName)
}
