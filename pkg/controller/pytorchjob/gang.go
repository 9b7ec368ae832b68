package pytorchjob

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
)

// GangScheduler is the gang scheduler PyTorchJobs use, as v1's
// --gang-scheduler-name: none, Volcano or the scheduler-plugins'
// coscheduling. As in v1, runPolicy.schedulingPolicy matters only with one.
type GangScheduler string

// Gang schedulers.
const (
	GangNone             GangScheduler = ""
	GangVolcano          GangScheduler = "volcano"
	GangSchedulerPlugins GangScheduler = "scheduler-plugins"
)

// schedulerNames are the pods' schedulerName under each gang scheduler, when
// the template sets none (v1 set Volcano's; scheduler-plugins' is the name its
// manifests give their second scheduler).
var schedulerNames = map[GangScheduler]string{
	GangVolcano:          "volcano",
	GangSchedulerPlugins: "scheduler-plugins-scheduler",
}

// ParseGangScheduler checks a gang scheduler name.
func ParseGangScheduler(s string) (GangScheduler, error) {
	switch g := GangScheduler(s); g {
	case GangNone, GangVolcano, GangSchedulerPlugins:
		return g, nil
	}
	return "", fmt.Errorf("unknown gang scheduler %q: want %s, %s or none", s, GangVolcano, GangSchedulerPlugins)
}

// withGang puts a PyTorchJob under the gang scheduler: the runtime asks for
// the scheduler's PodGroup (the coscheduling or Volcano plugin builds it,
// with runPolicy.schedulingPolicy's schedule timeout), and pods without a
// scheduler get the gang scheduler's. The rest of schedulingPolicy shapes the
// PodGroup through the request (gangPolicy): the runtime API has no place
// for it.
func withGang(rt *runtime.Runtime, job *kubeflowv1.PyTorchJob, gs GangScheduler) {
	if gs == GangNone {
		return
	}
	sp := job.Spec.RunPolicy.SchedulingPolicy
	if sp == nil {
		sp = &kubeflowv1.SchedulingPolicy{}
	}
	pgp := &trainer.PodGroupPolicy{}
	switch gs {
	case GangVolcano:
		pgp.Volcano = &trainer.VolcanoPodGroupPolicySource{}
	case GangSchedulerPlugins:
		pgp.Coscheduling = &trainer.CoschedulingPodGroupPolicySource{ScheduleTimeoutSeconds: sp.ScheduleTimeoutSeconds}
	}
	rt.Spec.PodGroupPolicy = pgp
	for k := range rt.Spec.Template.Spec.ReplicatedJobs {
		ps := &rt.Spec.Template.Spec.ReplicatedJobs[k].Template.Spec.Template.Spec
		if ps.SchedulerName == "" {
			ps.SchedulerName = schedulerNames[gs]
		}
	}
}

// gangPolicy is runPolicy.schedulingPolicy as the request's gang policy:
// minAvailable (minMember) and minResources for either scheduler's
// PodGroup, queue and priorityClass for Volcano's (the coscheduling plugin
// has no place for them). Each set field replaces what the gang plugin
// derives from the pods; without a gang scheduler it means nothing, as in
// v1.
func gangPolicy(job *kubeflowv1.PyTorchJob, gs GangScheduler) *runtime.GangPolicy {
	sp := job.Spec.RunPolicy.SchedulingPolicy
	if gs == GangNone || sp == nil {
		return nil
	}
	return &runtime.GangPolicy{
		MinMember:     sp.MinAvailable,
		MinResources:  (*corev1.ResourceList)(sp.MinResources),
		Queue:         sp.Queue,
		PriorityClass: sp.PriorityClass,
	}
}
