package mpijob

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/controller/v1job"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
)

// +kubebuilder:rbac:groups=kubeflow.org,resources=mpijobs,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=kubeflow.org,resources=mpijobs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=kubeflow.org,resources=mpijobs/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;patch;delete

// The defaulting webhook runs on create only (the controller defaults in
// memory on every pass).
//
// +kubebuilder:webhook:path=/mutate-kubeflow-org-v1-mpijob,mutating=true,failurePolicy=fail,timeoutSeconds=10,sideEffects=None,groups=kubeflow.org,resources=mpijobs,verbs=create,versions=v1,name=mmpijob.kubeflow.org,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/validate-kubeflow-org-v1-mpijob,mutating=false,failurePolicy=fail,timeoutSeconds=10,sideEffects=None,groups=kubeflow.org,resources=mpijobs,verbs=create;update,versions=v1,name=vmpijob.kubeflow.org,admissionReviewVersions=v1

// Def is the MPIJob kind, as training-operator v1.9 ran it: a Launcher (one
// pod, whose success is the job's) and Workers (0 by default); restart
// policy Never by default; cleanPodPolicy None (the deprecated
// spec.cleanPodPolicy wins over runPolicy's when set, as in v1);
// slotsPerWorker 1.
var Def = &v1job.Def{
	Kind:          kubeflowv1.MPIJobKind,
	Name:          "mpijob",
	Resource:      "mpijobs",
	Value:         "mpiJob",
	OperatorName:  kubeflowv1.MPIJobOperatorName,
	SpecsField:    "mpiReplicaSpecs",
	Roles:         []kubeflowv1.ReplicaType{kubeflowv1.MPIJobReplicaTypeLauncher, kubeflowv1.MPIJobReplicaTypeWorker},
	Required:      []kubeflowv1.ReplicaType{kubeflowv1.MPIJobReplicaTypeLauncher},
	Single:        []kubeflowv1.ReplicaType{kubeflowv1.MPIJobReplicaTypeLauncher},
	RestartPolicy: kubeflowv1.MPIJobDefaultRestartPolicy,
	SuccessRole:   kubeflowv1.MPIJobReplicaTypeLauncher,
	MasterRole:    kubeflowv1.MPIJobReplicaTypeLauncher,
	// v1 made no Services; the workers' host names must resolve for SSH.
	Services:       true,
	FailOnEviction: true,
	DefaultReplicas: func(t kubeflowv1.ReplicaType) int32 {
		if t == kubeflowv1.MPIJobReplicaTypeWorker {
			return 0
		}
		return 1
	},
	New:     func() v1job.Job { return &kubeflowv1.MPIJob{} },
	NewList: func() client.ObjectList { return &kubeflowv1.MPIJobList{} },
	Items: func(l client.ObjectList) []v1job.Job {
		var out []v1job.Job
		for i := range l.(*kubeflowv1.MPIJobList).Items {
			out = append(out, &l.(*kubeflowv1.MPIJobList).Items[i])
		}
		return out
	},
	DefaultKind:  defaultMPIJob,
	ValidateKind: validateMPIJob,
	Pod:          pod,
	OwnPlugins:   func() []framework.Plugin { return []framework.Plugin{&Transport{}} },
}

// NewKind returns the MPIJob kind: enabled, 20 jobs at once
// (--enable-mpijob, --mpijob-concurrency).
func NewKind() *Kind {
	return &Kind{v1job.NewKind(Def, func(mgr ctrl.Manager) error { return v1job.SetupWebhooks(mgr, Def, &kubeflowv1.MPIJob{}) })}
}

// Kind is the MPIJob kind: a jobframework.Kind, jobframework.Charted and
// view.Provider, all from the v1 kinds' library.
type Kind struct{ *v1job.Kind }

// defaultMPIJob applies MPIJob's own defaults: slotsPerWorker 1, and the
// deprecated spec.cleanPodPolicy over runPolicy's (v1 let it win).
func defaultMPIJob(j v1job.Job) {
	job := j.(*kubeflowv1.MPIJob)
	if job.Spec.SlotsPerWorker == nil {
		one := int32(1)
		job.Spec.SlotsPerWorker = &one
	}
	if p := job.Spec.CleanPodPolicy; p != nil {
		job.Spec.RunPolicy.CleanPodPolicy = p
	}
}

// validateMPIJob checks MPIJob's own fields.
func validateMPIJob(j v1job.Job) field.ErrorList {
	job := j.(*kubeflowv1.MPIJob)
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if s := job.Spec.SlotsPerWorker; s != nil && *s < 1 {
		errs = append(errs, field.Invalid(spec.Child("slotsPerWorker"), *s, "must be at least 1"))
	}
	if p := job.Spec.CleanPodPolicy; p != nil && !v1job.ValidCleanPodPolicy(*p) {
		errs = append(errs, field.NotSupported(spec.Child("cleanPodPolicy"), *p, v1job.CleanPodPolicies()))
	}
	if name := job.Spec.MainContainer; name != "" {
		if rs := launcherSpec(job); rs != nil && len(rs.Template.Spec.Containers) > 0 && !hasContainer(rs, name) {
			errs = append(errs, field.Invalid(spec.Child("mainContainer"), name, "must name a container of the Launcher"))
		}
	}
	return errs
}

// launcherSpec is the Launcher's replica spec, whatever the case of its key.
func launcherSpec(job *kubeflowv1.MPIJob) *kubeflowv1.ReplicaSpec {
	for k, rs := range job.Spec.MPIReplicaSpecs {
		if strings.EqualFold(string(k), string(kubeflowv1.MPIJobReplicaTypeLauncher)) {
			return rs
		}
	}
	return nil
}

func hasContainer(rs *kubeflowv1.ReplicaSpec, name string) bool {
	for _, c := range rs.Template.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	return false
}
