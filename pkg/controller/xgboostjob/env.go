package xgboostjob

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/controller/v1job"
)

// withEnv gives every container of a replica's pod v1's environment,
// after the container's own variables.
func withEnv(j v1job.Job, p v1job.PodInfo, tpl *v1job.PodTemplate) error {
	env, err := Env(j.(*kubeflowv1.XGBoostJob), p.Type, p.Index)
	if err != nil {
		return err
	}
	for i := range tpl.Spec.Containers {
		tpl.Spec.Containers[i].Env = append(tpl.Spec.Containers[i].Env, env...)
	}
	return nil
}

// Env is v1's environment of a defaulted job's replica, in v1's order:
// MASTER_PORT (the Master's xgboostjob-port), MASTER_ADDR (<job>-master-0,
// its Service), WORLD_SIZE (every replica), RANK (the Master 0, worker i
// i+1), PYTHONUNBUFFERED=1; with more than one replica also WORKER_PORT (the
// Workers' xgboostjob-port) and WORKER_ADDRS (the workers' Services,
// comma-separated).
func Env(job *kubeflowv1.XGBoostJob, rtype kubeflowv1.ReplicaType, index int) ([]corev1.EnvVar, error) {
	master, worker := kubeflowv1.XGBoostJobReplicaTypeMaster, kubeflowv1.XGBoostJobReplicaTypeWorker
	rank := index
	if rtype == worker {
		rank += int(v1job.Replicas(job, master))
	}
	masterPort, ok := Def.PortOf(job, master)
	if !ok {
		return nil, fmt.Errorf("the %s container of the Master has no port named %s", Def.Container, Def.PortName)
	}
	total := int(v1job.Replicas(job, master) + v1job.Replicas(job, worker))
	env := []corev1.EnvVar{
		{Name: "MASTER_PORT", Value: strconv.Itoa(int(masterPort))},
		{Name: "MASTER_ADDR", Value: v1job.ReplicaName(job.Name, master, 0)},
		{Name: "WORLD_SIZE", Value: strconv.Itoa(total)},
		{Name: "RANK", Value: strconv.Itoa(rank)},
		{Name: "PYTHONUNBUFFERED", Value: "1"},
	}
	if total > 1 {
		workerPort, ok := Def.PortOf(job, worker)
		if !ok {
			return nil, fmt.Errorf("the %s container of the Workers has no port named %s", Def.Container, Def.PortName)
		}
		addrs := make([]string, 0, total-1)
		for i := range total - 1 {
			addrs = append(addrs, v1job.ReplicaName(job.Name, worker, i))
		}
		env = append(env,
			corev1.EnvVar{Name: "WORKER_PORT", Value: strconv.Itoa(int(workerPort))},
			corev1.EnvVar{Name: "WORKER_ADDRS", Value: strings.Join(addrs, ",")})
	}
	return env, nil
}
