package pytorchjob

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/plan"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/coscheduling"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/volcano"
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
// scheduler get the gang scheduler's. The rest of schedulingPolicy is
// applied to the plan's PodGroup afterwards (schedulingPolicy.apply): the
// runtime API has no place for it.
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

// applySchedulingPolicy puts the rest of runPolicy.schedulingPolicy on the
// plan's PodGroup, each set field replacing what the gang plugin derived from
// the pods: minAvailable (minMember) and minResources on either scheduler's
// PodGroup, queue and priorityClass on Volcano's.
func applySchedulingPolicy(p *plan.Plan, job *kubeflowv1.PyTorchJob, gs GangScheduler) error {
	sp := job.Spec.RunPolicy.SchedulingPolicy
	if gs == GangNone || sp == nil {
		return nil
	}
	gvk := coscheduling.PodGroupGVK
	if gs == GangVolcano {
		gvk = volcano.PodGroupGVK
	}
	for _, c := range p.Children {
		pg, ok := c.Object.(*unstructured.Unstructured)
		if !ok || pg.GroupVersionKind() != gvk {
			continue
		}
		set := func(v any, field string) error {
			if err := unstructured.SetNestedField(pg.Object, v, "spec", field); err != nil {
				return fmt.Errorf("PodGroup %s: schedulingPolicy %s: %w", pg.GetName(), field, err)
			}
			return nil
		}
		if sp.MinAvailable != nil {
			if err := set(int64(*sp.MinAvailable), "minMember"); err != nil {
				return err
			}
		}
		if sp.MinResources != nil {
			unstructured.RemoveNestedField(pg.Object, "spec", "minResources")
			if len(*sp.MinResources) > 0 {
				res := map[string]any{}
				for name, q := range *sp.MinResources {
					res[string(name)] = q.String()
				}
				if err := set(res, "minResources"); err != nil {
					return err
				}
			}
		}
		if gs != GangVolcano {
			continue
		}
		for field, v := range map[string]string{"queue": sp.Queue, "priorityClassName": sp.PriorityClass} {
			if v == "" {
				continue
			}
			if err := set(v, field); err != nil {
				return err
			}
		}
	}
	return nil
}
