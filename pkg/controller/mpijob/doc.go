// Package mpijob is the kubeflow.org/v1 MPIJob kind (training-operator
// v1.9's, not mpi-operator's v2beta1), all of it, on the v1 kinds' library
// (pkg/controller/v1job): its Def (roles Launcher and Worker, defaults,
// validation, the launcher's success is the job's), the launcher's and
// workers' pods (mpi.go) and its plugin, which makes the job's ConfigMap
// <job>-config (hostfile, kubexec.sh, discover_hosts.sh, sshd.sh) and SSH
// key Secret (transport.go).
//
// The transport differs from v1's (docs/mpijob.md): v1 copied kubectl into
// the launcher and gave it a Role to `kubectl exec` into the workers;
// Trainyard's launcher reaches its workers over SSH with a key pair made for
// the job alone, as mpi-operator v2 and Kubeflow Trainer's MPI runtime do.
// The launcher gets no Kubernetes API rights at all, so it can reach only
// the workers that hold the job's public key: its own. kubexec.sh keeps its
// name and place (/etc/mpi/kubexec.sh), so v1's environment
// (OMPI_MCA_plm_rsh_agent, I_MPI_HYDRA_BOOTSTRAP_EXEC) is unchanged.
package mpijob
