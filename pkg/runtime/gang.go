package runtime

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/ptr"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// Gang is what a gang scheduler must place at once for one job: every pod of
// every replicated job (initializers and launcher included) and their summed
// requests.
type Gang struct {
	// MinMember is the number of pods.
	MinMember int32
	// MinResources is the sum over the pods of each pod's requests.
	MinResources corev1.ResourceList
}

// PodGroupSpec renders the part of a PodGroup spec that every gang scheduler's
// PodGroup shares (minMember, and minResources when any pod requests
// something), as unstructured content.
func (g Gang) PodGroupSpec() map[string]any {
	spec := map[string]any{"minMember": int64(g.MinMember)}
	if len(g.MinResources) > 0 {
		res := make(map[string]any, len(g.MinResources))
		for name, q := range g.MinResources {
			res[string(name)] = q.String()
		}
		spec["minResources"] = res
	}
	return spec
}

// PodCount returns how many pods a replicated job of the Info runs once the
// JobSet is rendered: jobs bound to TrainJob fields (an ancestor label) run
// one replica, the trainer's parallelism being NumNodes; any other job runs
// replicas × parallelism (each default 1).
func (i *Info) PodCount(rjob string) int32 {
	rj := i.ReplicatedJob(rjob)
	if rj == nil {
		return 0
	}
	replicas := rj.Replicas
	if replicas == 0 {
		replicas = 1
	}
	parallelism := ptr.Deref(rj.Template.Spec.Parallelism, 1)
	switch ancestor := rj.Template.Labels[trainer.AncestorLabel]; {
	case ancestor == trainer.AncestorTrainer:
		return i.NumNodes
	case ancestor != "":
		return parallelism
	}
	return replicas * parallelism
}

// Gang sums the pods of the Info and their requests. A pod's requests follow
// the Kubernetes rules the scheduler uses (init containers and sidecars
// count, pod overhead and pod-level requests too), so that a gang is admitted
// only where all of it fits.
func (i *Info) Gang() Gang {
	g := Gang{MinResources: corev1.ResourceList{}}
	for k := range i.Spec.ReplicatedJobs {
		rj := &i.Spec.ReplicatedJobs[k]
		n := i.PodCount(rj.Name)
		g.MinMember += n
		pod := &corev1.Pod{Spec: *rj.Template.Spec.Template.Spec.DeepCopy()}
		defaultRequests(pod)
		for name, q := range resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}) {
			total := g.MinResources[name]
			total.Add(mulQuantity(q, n))
			g.MinResources[name] = total
		}
	}
	return g
}

// defaultRequests sets, as the API server does, a container's missing
// requests to its limits.
func defaultRequests(pod *corev1.Pod) {
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for k := range cs {
			r := &cs[k].Resources
			for name, q := range r.Limits {
				if _, ok := r.Requests[name]; !ok {
					if r.Requests == nil {
						r.Requests = corev1.ResourceList{}
					}
					r.Requests[name] = q.DeepCopy()
				}
			}
		}
	}
}

// mulQuantity returns q×n exactly (as a milli-value when q has a fractional part).
func mulQuantity(q resource.Quantity, n int32) resource.Quantity {
	out := q.DeepCopy()
	out.Mul(int64(n))
	return out
}

// PriorityClassName is the priority class of a gang's PodGroup: that of the
// last replicated job (in template order) whose pods set one. The Volcano
// plugin writes it into the PodGroup and validation.ValidateLookups checks
// that it exists.
func (i *Info) PriorityClassName() string {
	name := ""
	for k := range i.Spec.ReplicatedJobs {
		if p := i.Spec.ReplicatedJobs[k].Template.Spec.Template.Spec.PriorityClassName; p != "" {
			name = p
		}
	}
	return name
}
