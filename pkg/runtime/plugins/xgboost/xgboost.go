// Package xgboost gives the trainer pods of an XGBoost runtime the DMLC_*
// environment through which XGBoost's collective (Rabit) finds its tracker:
// pod 0 hosts the tracker, every pod (or every GPU) is one worker.
package xgboost

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
)

// Name of the plugin.
const Name = "XGBoost"

// The variables XGBoost's collective reads to reach its tracker.
const (
	EnvTrackerURI  = "DMLC_TRACKER_URI"
	EnvTrackerPort = "DMLC_TRACKER_PORT"
	EnvTaskID      = "DMLC_TASK_ID"
	EnvNumWorker   = "DMLC_NUM_WORKER"
)

// reserved are the names this plugin sets; a user value would be replaced, so
// it is rejected instead.
var reserved = []string{EnvTrackerURI, EnvTrackerPort, EnvTaskID, EnvNumWorker}

// XGBoost is the plugin.
type XGBoost struct{}

var (
	_ framework.ValidatePlugin = (*XGBoost)(nil)
	_ framework.MLPolicyPlugin = (*XGBoost)(nil)
	_ framework.PolicyClaimer  = (*XGBoost)(nil)
)

// New returns the plugin.
func New() *XGBoost { return &XGBoost{} }

// Name implements framework.Plugin.
func (*XGBoost) Name() string { return Name }

// ClaimsMLPolicies implements framework.PolicyClaimer.
func (*XGBoost) ClaimsMLPolicies() []string { return []string{"xgboost"} }

func enabled(info *runtime.Info) bool {
	mp := info.MLPolicy()
	return mp != nil && mp.XGBoost != nil
}

// Validate rejects the reserved DMLC_* names in spec.trainer.env (Kubeflow
// Trainer's message and path).
func (*XGBoost) Validate(info *runtime.Info, req *runtime.Request) field.ErrorList {
	if !enabled(info) || req.Trainer == nil {
		return nil
	}
	var errs field.ErrorList
	path := req.Paths.Trainer.Child("env")
	for i, e := range req.Trainer.Env {
		for _, r := range reserved {
			if e.Name == r {
				errs = append(errs, field.Forbidden(path.Index(i), fmt.Sprintf("%s is reserved for the XGBoost runtime", r)))
			}
		}
	}
	return errs
}

// EnforceMLPolicy injects the tracker environment and port into the trainer's
// node container, only when the TrainJob has a trainer block. There is one
// worker per pod on CPU nodes and one per GPU on GPU nodes; DMLC_TASK_ID is the
// pod's index, so a GPU program derives its workers' ranks from it.
func (*XGBoost) EnforceMLPolicy(info *runtime.Info, req *runtime.Request) error {
	if !enabled(info) || req.Trainer == nil {
		return nil
	}
	c := info.TrainerContainer()
	if c == nil {
		return fmt.Errorf("xgboost runtime %q has no trainer %q container", info.Runtime.Name, trainer.NodeContainer)
	}
	perNode := max(runtime.GPUs(c.Resources), 1)
	c.Env = runtime.UpsertEnv(c.Env,
		corev1.EnvVar{Name: EnvTrackerURI, Value: info.MasterAddr(req)},
		corev1.EnvVar{Name: EnvTrackerPort, Value: strconv.Itoa(int(trainer.ContainerTrainerPort))},
		runtime.CompletionIndexEnv(EnvTaskID),
		corev1.EnvVar{Name: EnvNumWorker, Value: strconv.FormatInt(int64(info.NumNodes)*perNode, 10)},
	)
	runtime.UpsertPort(c, corev1.ContainerPort{ContainerPort: trainer.ContainerTrainerPort, Protocol: corev1.ProtocolTCP})
	return nil
}
