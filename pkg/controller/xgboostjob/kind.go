package xgboostjob

import (
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/controller/v1job"
)

// +kubebuilder:rbac:groups=kubeflow.org,resources=xgboostjobs,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=kubeflow.org,resources=xgboostjobs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=kubeflow.org,resources=xgboostjobs/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;patch;delete

// The defaulting webhook runs on create only (the controller defaults in
// memory on every pass).
//
// +kubebuilder:webhook:path=/mutate-kubeflow-org-v1-xgboostjob,mutating=true,failurePolicy=fail,timeoutSeconds=10,sideEffects=None,groups=kubeflow.org,resources=xgboostjobs,verbs=create,versions=v1,name=mxgboostjob.kubeflow.org,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/validate-kubeflow-org-v1-xgboostjob,mutating=false,failurePolicy=fail,timeoutSeconds=10,sideEffects=None,groups=kubeflow.org,resources=xgboostjobs,verbs=create;update,versions=v1,name=vxgboostjob.kubeflow.org,admissionReviewVersions=v1

// Def is the XGBoostJob kind, as training-operator v1.9 ran it: a Master
// (one pod, rank 0, whose success is the job's) and Workers; every replica
// has the container xgboost, which gets the port xgboostjob-port (9999)
// unless it has one; restart policy Never by default; cleanPodPolicy None.
var Def = &v1job.Def{
	Kind:          kubeflowv1.XGBoostJobKind,
	Name:          "xgboostjob",
	Resource:      "xgboostjobs",
	Value:         "xgboostJob",
	OperatorName:  kubeflowv1.XGBoostJobOperatorName,
	SpecsField:    "xgbReplicaSpecs",
	Roles:         []kubeflowv1.ReplicaType{kubeflowv1.XGBoostJobReplicaTypeMaster, kubeflowv1.XGBoostJobReplicaTypeWorker},
	Required:      []kubeflowv1.ReplicaType{kubeflowv1.XGBoostJobReplicaTypeMaster},
	Single:        []kubeflowv1.ReplicaType{kubeflowv1.XGBoostJobReplicaTypeMaster},
	Container:     kubeflowv1.XGBoostJobDefaultContainerName,
	PortName:      kubeflowv1.XGBoostJobDefaultPortName,
	Port:          kubeflowv1.XGBoostJobDefaultPort,
	RestartPolicy: kubeflowv1.XGBoostJobDefaultRestartPolicy,
	SuccessRole:   kubeflowv1.XGBoostJobReplicaTypeMaster,
	MasterRole:    kubeflowv1.XGBoostJobReplicaTypeMaster,
	Services:      true,
	New:           func() v1job.Job { return &kubeflowv1.XGBoostJob{} },
	NewList:       func() client.ObjectList { return &kubeflowv1.XGBoostJobList{} },
	Items: func(l client.ObjectList) []v1job.Job {
		var out []v1job.Job
		for i := range l.(*kubeflowv1.XGBoostJobList).Items {
			out = append(out, &l.(*kubeflowv1.XGBoostJobList).Items[i])
		}
		return out
	},
}

// The environment reads Def (the kind's port), so it joins Def once Def exists.
func init() { Def.Pod = withEnv }

// NewKind returns the XGBoostJob kind: enabled, 20 jobs at once
// (--enable-xgboostjob, --xgboostjob-concurrency).
func NewKind() *Kind {
	return &Kind{v1job.NewKind(Def, func(mgr ctrl.Manager) error { return v1job.SetupWebhooks(mgr, Def, &kubeflowv1.XGBoostJob{}) })}
}

// Kind is the XGBoostJob kind: a jobframework.Kind, jobframework.Charted and
// view.Provider, all from the v1 kinds' library.
type Kind struct{ *v1job.Kind }
