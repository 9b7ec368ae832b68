// Package torch gives the trainer pods of a torch runtime the environment that
// torchrun reads (PET_*), so that `torchrun train.py` needs no flags.
package torch

import (
	"errors"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
)

// Name of the plugin.
const Name = "Torch"

// The variables torchrun reads. Each PET_<OPTION> stands for torchrun's --<option>.
const (
	EnvNumNodes       = "PET_NNODES"
	EnvNumProcPerNode = "PET_NPROC_PER_NODE"
	EnvNodeRank       = "PET_NODE_RANK"
	EnvMasterAddr     = "PET_MASTER_ADDR"
	EnvMasterPort     = "PET_MASTER_PORT"
	EnvRdzvBackend    = "PET_RDZV_BACKEND"
	EnvRdzvEndpoint   = "PET_RDZV_ENDPOINT"
	EnvRdzvID         = "PET_RDZV_ID"
	EnvMaxRestarts    = "PET_MAX_RESTARTS"
)

// CompletionIndexAnnotation is set by the Job controller on every pod of an
// Indexed Job; the node rank comes from it.
const CompletionIndexAnnotation = runtime.CompletionIndexAnnotation

// reserved are variables a user must not set on a torch job: the ones this plugin
// sets, and the ones torchrun itself sets for its workers (a user value would be
// silently replaced, and a job that reads them would train each node on its own).
var reserved = []string{
	EnvNumNodes, EnvNumProcPerNode, EnvNodeRank, EnvMasterAddr, EnvMasterPort,
	EnvRdzvBackend, EnvRdzvEndpoint, EnvRdzvID, EnvMaxRestarts,
	"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "GROUP_RANK", "LOCAL_WORLD_SIZE",
}

// Torch is the plugin.
type Torch struct {
	// ClusterDomain is the cluster's DNS domain, part of the elastic rendezvous
	// endpoint (see RdzvEndpoint; plugins.Ordered passes the manager's).
	ClusterDomain string
}

var (
	_ framework.ValidatePlugin = (*Torch)(nil)
	_ framework.MLPolicyPlugin = (*Torch)(nil)
	_ framework.PolicyClaimer  = (*Torch)(nil)
)

// New returns the plugin for a cluster whose DNS domain is runtime.DefaultClusterDomain.
func New() *Torch { return &Torch{ClusterDomain: runtime.DefaultClusterDomain} }

// Name implements framework.Plugin.
func (*Torch) Name() string { return Name }

// ClaimsMLPolicies implements framework.PolicyClaimer.
func (*Torch) ClaimsMLPolicies() []string { return []string{"torch"} }

func policy(info *runtime.Info) *trainer.TorchMLPolicySource {
	if mp := info.MLPolicy(); mp != nil {
		return mp.Torch
	}
	return nil
}

// IsReserved reports whether a variable name is set by Trainyard or torchrun on torch jobs.
func IsReserved(name string) bool {
	for _, r := range reserved {
		if r == name {
			return true
		}
	}
	return false
}

// Validate rejects reserved variables in spec.trainer.env, a runtime without a
// trainer node container, and a process count that cannot be resolved.
func (t *Torch) Validate(info *runtime.Info, req *runtime.Request) field.ErrorList {
	if policy(info) == nil {
		return nil
	}
	var errs field.ErrorList
	if req.Trainer != nil {
		envPath := req.Paths.Trainer.Child("env")
		for k, e := range req.Trainer.Env {
			if IsReserved(e.Name) {
				errs = append(errs, field.Invalid(envPath.Index(k).Child("name"), e.Name,
					"is set by Trainyard or torchrun for torch runtimes and must not be set by the TrainJob"))
			}
		}
	}
	c := info.TrainerContainer()
	if c == nil {
		return append(errs, field.Invalid(req.Paths.Runtime, info.Runtime.Name,
			fmt.Sprintf("torch runtime %s %q has no replicated job labelled %s=%s with a %q container",
				info.Runtime.Kind, info.Runtime.Name, trainer.AncestorLabel, trainer.AncestorTrainer, trainer.NodeContainer)))
	}
	res := c.Resources
	if req.Trainer != nil && req.Trainer.ResourcesPerNode != nil {
		res = runtime.MergeResources(res, *req.Trainer.ResourcesPerNode)
	}
	if _, err := ProcPerNode(policy(info), req, res); err != nil {
		var fe *field.Error
		if errors.As(err, &fe) {
			errs = append(errs, fe)
		}
	}
	if IsTorchtune(req) {
		errs = append(errs, validateTorchtune(info, req, runtime.GPUs(res))...)
	}
	return errs
}

// EnforceMLPolicy sets the node count and injects the torchrun environment into
// the trainer's node container (and the envInjection targets).
func (t *Torch) EnforceMLPolicy(info *runtime.Info, req *runtime.Request) error {
	pol := policy(info)
	if pol == nil {
		return nil
	}
	c := info.TrainerContainer()
	if c == nil {
		return fmt.Errorf("torch runtime %q has no trainer %q container", info.Runtime.Name, trainer.NodeContainer)
	}
	nproc, err := ProcPerNode(pol, req, c.Resources)
	if err != nil {
		return err
	}
	port := strconv.Itoa(int(trainer.ContainerTrainerPort))
	env := []corev1.EnvVar{
		{Name: EnvNumNodes, Value: strconv.Itoa(int(info.NumNodes))},
		{Name: EnvNumProcPerNode, Value: nproc},
	}
	if ep := pol.ElasticPolicy; ep != nil {
		// Elastic: torchrun's c10d rendezvous, hosted by node 0's agent (see
		// RdzvEndpoint), assigns node ranks; the pod count is the TrainJob's
		// numNodes, else the upper bound.
		lo, hi := elasticBounds(ep, info.NumNodes)
		if req.Trainer == nil || req.Trainer.NumNodes == nil {
			info.NumNodes = hi
		}
		env = []corev1.EnvVar{
			{Name: EnvNumNodes, Value: fmt.Sprintf("%d:%d", lo, hi)},
			{Name: EnvNumProcPerNode, Value: nproc},
			{Name: EnvRdzvBackend, Value: "c10d"},
			{Name: EnvRdzvEndpoint, Value: RdzvEndpoint(info, req, t.ClusterDomain) + ":" + port},
			{Name: EnvRdzvID, Value: req.Name},
		}
		if ep.MaxRestarts != nil {
			env = append(env, corev1.EnvVar{Name: EnvMaxRestarts, Value: strconv.Itoa(int(*ep.MaxRestarts))})
		}
	} else {
		env = append(env,
			runtime.CompletionIndexEnv(EnvNodeRank),
			corev1.EnvVar{Name: EnvMasterAddr, Value: info.MasterAddr(req)},
			corev1.EnvVar{Name: EnvMasterPort, Value: port},
		)
	}
	if IsTorchtune(req) && pol.ElasticPolicy == nil {
		// tune run gets the rendezvous endpoint on its command line; the
		// master variables would make torchrun rendezvous a second way.
		c.Env = runtime.UpsertEnv(c.Env, env[:3]...)
		c.Command = tuneCommand(info, req, runtime.GPUs(c.Resources))
	} else {
		c.Env = runtime.UpsertEnv(c.Env, env...)
	}
	runtime.UpsertPort(c, corev1.ContainerPort{ContainerPort: trainer.ContainerTrainerPort, Protocol: corev1.ProtocolTCP})

	if pol.EnvInjection != nil {
		for k, target := range pol.EnvInjection.Targets {
			for _, name := range target.ContainerNames {
				tc := info.Container(target.JobName, name)
				if tc == nil {
					return field.NotFound(field.NewPath("runtime", "spec", "mlPolicy", "torch", "envInjection", "targets").Index(k),
						target.JobName+"/"+name)
				}
				tc.Env = runtime.UpsertEnv(tc.Env, env...)
			}
		}
	}
	return nil
}

func elasticBounds(ep *trainer.TorchElasticPolicy, numNodes int32) (int32, int32) {
	lo, hi := numNodes, numNodes
	if ep.MinNodes != nil {
		lo = *ep.MinNodes
	}
	if ep.MaxNodes != nil {
		hi = *ep.MaxNodes
	}
	if hi < lo {
		hi = lo
	}
	return lo, hi
}

// RdzvEndpoint is the host of an elastic job's c10d rendezvous: the fully
// qualified name of the trainer job's first pod,
// <MasterAddr>.<namespace>.svc.<cluster domain>.
//
// torchrun's c10d backend starts the rendezvous store only in the agent that
// recognises the endpoint's host as its own: the host must be "localhost", a
// loopback or own address, the agent's host name (socket.gethostname()), or the
// canonical name that host name resolves to (getaddrinfo with AI_CANONNAME);
// every other agent connects to the store as a client. A JobSet pod's host name
// is <job>-<replicated job>-0-<i> and its subdomain the JobSet's headless
// Service, so the kubelet's /etc/hosts line for the pod itself reads
// "<ip> <host>.<subdomain>.<ns>.svc.<cluster domain> <host>": the canonical name
// is the fully qualified one. MasterAddr (<host>.<subdomain>) is neither, so
// with it no agent would serve the store and every agent would wait for it. The
// bare host name is the agent's own but does not resolve in the other pods
// (cluster DNS answers <host>.<subdomain>.<ns>.svc.<domain>, and the search path
// only completes <host>.<subdomain>). The fully qualified name is both: node 0
// recognises it, every pod resolves it.
func RdzvEndpoint(info *runtime.Info, req *runtime.Request, clusterDomain string) string {
	return fmt.Sprintf("%s.%s.svc.%s", info.MasterAddr(req), req.Namespace, clusterDomain)
}

// ProcPerNode resolves the processes per node. The TrainJob's value wins over the
// runtime's; the default is "auto". "auto" means one process per GPU when the
// node has GPUs, else one per CPU; "gpu" and "cpu" force one or the other. The
// counts come from the given resources, which are the runtime's merged with the
// TrainJob's, so a GPU declared only by the runtime still counts.
func ProcPerNode(pol *trainer.TorchMLPolicySource, req *runtime.Request, res corev1.ResourceRequirements) (string, error) {
	v := intstr.FromString(runtime.ProcAuto)
	if pol.NumProcPerNode != nil {
		v = *pol.NumProcPerNode
	}
	if req.Trainer != nil && req.Trainer.NumProcPerNode != nil {
		v = *req.Trainer.NumProcPerNode
	}
	path := req.Paths.Trainer.Child("numProcPerNode")
	if err := runtime.CheckNumProcPerNode(path, v); err != nil {
		return "", err
	}
	if v.Type == intstr.Int {
		return strconv.Itoa(int(v.IntVal)), nil
	}
	gpus, cpus := runtime.GPUs(res), CPUs(res)
	switch v.StrVal {
	case runtime.ProcAuto:
		if gpus > 0 {
			return strconv.FormatInt(gpus, 10), nil
		}
		return strconv.FormatInt(max(cpus, 1), 10), nil
	case runtime.ProcCPU:
		return strconv.FormatInt(max(cpus, 1), 10), nil
	}
	if gpus == 0 {
		return "", field.Invalid(path, v.StrVal, "the trainer node requests no GPUs (set resourcesPerNode with a GPU resource, or use an integer or auto)")
	}
	return strconv.FormatInt(gpus, 10), nil
}

// CPUs counts whole CPUs (rounded up) from the request, else the limit; 0 when neither is set.
func CPUs(res corev1.ResourceRequirements) int64 {
	for _, list := range []corev1.ResourceList{res.Requests, res.Limits} {
		if q, ok := list[corev1.ResourceCPU]; ok {
			return ceilCores(q)
		}
	}
	return 0
}

func ceilCores(q resource.Quantity) int64 { return (q.MilliValue() + 999) / 1000 }
