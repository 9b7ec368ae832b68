// Package jax gives the trainer pods of a JAX runtime the environment that
// jax.distributed.initialize() reads (JAX_*), so that a JAX program needs no
// coordinator flags: one JAX process per pod, process 0 coordinating.
package jax

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
)

// Name of the plugin.
const Name = "JAX"

// The variables jax.distributed.initialize() reads when called without arguments.
const (
	EnvNumProcesses       = "JAX_NUM_PROCESSES"
	EnvProcessID          = "JAX_PROCESS_ID"
	EnvCoordinatorAddress = "JAX_COORDINATOR_ADDRESS"
)

// JAX is the plugin.
type JAX struct{}

var (
	_ framework.MLPolicyPlugin = (*JAX)(nil)
	_ framework.PolicyClaimer  = (*JAX)(nil)
)

// New returns the plugin.
func New() *JAX { return &JAX{} }

// Name implements framework.Plugin.
func (*JAX) Name() string { return Name }

// ClaimsMLPolicies implements framework.PolicyClaimer.
func (*JAX) ClaimsMLPolicies() []string { return []string{"jax"} }

// EnforceMLPolicy injects the JAX environment and the coordinator port into the
// trainer's node container, only when the TrainJob has a trainer block (as
// Kubeflow Trainer does: a TrainJob without one runs the runtime as written).
// The names are not reserved: a value the TrainJob sets in spec.trainer.env is
// kept, so a user can point JAX elsewhere.
func (*JAX) EnforceMLPolicy(info *runtime.Info, req *runtime.Request) error {
	if mp := info.MLPolicy(); mp == nil || mp.JAX == nil || req.Trainer == nil {
		return nil
	}
	c := info.TrainerContainer()
	if c == nil {
		return fmt.Errorf("jax runtime %q has no trainer %q container", info.Runtime.Name, trainer.NodeContainer)
	}
	port := strconv.Itoa(int(trainer.ContainerTrainerPort))
	user := runtime.EnvNames(req.Trainer.Env)
	for _, e := range []corev1.EnvVar{
		{Name: EnvNumProcesses, Value: strconv.Itoa(int(info.NumNodes))},
		runtime.CompletionIndexEnv(EnvProcessID),
		{Name: EnvCoordinatorAddress, Value: info.MasterAddr(req) + ":" + port},
	} {
		if !user[e.Name] {
			c.Env = runtime.UpsertEnv(c.Env, e)
		}
	}
	runtime.UpsertPort(c, corev1.ContainerPort{ContainerPort: trainer.ContainerTrainerPort, Protocol: corev1.ProtocolTCP})
	return nil
}
