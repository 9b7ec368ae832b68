package trainjob

import (
	corev1 "k8s.io/api/core/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// EventRestarted is sent when the JobSet's failure policy restarted the job.
const EventRestarted = "Restarted"

// restarts follows the JobSet's restart count: a restart (e.g. pods lost with
// their node, then the JobSet's failure policy) is kept in status.restarts and
// told once in an event. The count never goes down: a JobSet recreated while
// suspended starts again from 0, but the job's history does not.
func (p *pass) restarts(js *jobsetv1alpha2.JobSet) {
	if js == nil || js.Status.Restarts <= p.status.Restarts {
		return
	}
	p.status.Restarts = js.Status.Restarts
	limit := int32(0)
	if fp := js.Spec.FailurePolicy; fp != nil {
		limit = fp.MaxRestarts
	}
	p.event(corev1.EventTypeWarning, EventRestarted, "Restart",
		"JobSet %s restarted the job's pods (restart %d, at most %d)", js.Name, js.Status.Restarts, limit)
}
