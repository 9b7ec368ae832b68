package observe

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// What an observed JobSet says of the job it runs, the one reading of it for
// every job kind and plugin: whether it finished, and its replicated jobs'
// counts.

// Finish is how a JobSet finished: its first terminal condition.
type Finish struct {
	// Failed: the JobSet failed; else it completed.
	Failed bool
	// Reason, Message and Time are the condition's, verbatim.
	Reason, Message string
	Time            metav1.Time
}

// Finished returns how the JobSet finished (Completed or Failed, whichever
// is True first in its conditions) when it has: the one rule of "the JobSet
// finished" that every job kind's status follows.
func Finished(js *jobsetv1alpha2.JobSet) (Finish, bool) {
	if js == nil {
		return Finish{}, false
	}
	for _, c := range js.Status.Conditions {
		if c.Status == metav1.ConditionTrue && (c.Type == string(jobsetv1alpha2.JobSetCompleted) || c.Type == string(jobsetv1alpha2.JobSetFailed)) {
			return Finish{Failed: c.Type == string(jobsetv1alpha2.JobSetFailed), Reason: c.Reason, Message: c.Message, Time: c.LastTransitionTime}, true
		}
	}
	return Finish{}, false
}

// JobCounts are one replicated job's counts of Jobs, as its JobSet reports
// them.
type JobCounts struct {
	Name                                        string
	Ready, Succeeded, Failed, Active, Suspended int32
}

// Counts lists the counts the JobSet reports, in the order of its replicated
// jobs (a replicated job it reports nothing for yet is left out): nil when
// there is no JobSet, empty when it reports nothing yet.
func Counts(js *jobsetv1alpha2.JobSet) []JobCounts {
	if js == nil {
		return nil
	}
	byName := make(map[string]jobsetv1alpha2.ReplicatedJobStatus, len(js.Status.ReplicatedJobsStatus))
	for _, s := range js.Status.ReplicatedJobsStatus {
		byName[s.Name] = s
	}
	out := make([]JobCounts, 0, len(js.Status.ReplicatedJobsStatus))
	for _, rj := range js.Spec.ReplicatedJobs {
		if s, ok := byName[rj.Name]; ok {
			out = append(out, JobCounts{Name: s.Name, Ready: s.Ready, Succeeded: s.Succeeded, Failed: s.Failed, Active: s.Active, Suspended: s.Suspended})
		}
	}
	return out
}

// FailedJobs lists the replicated jobs the JobSet counts failed Jobs of, in
// the order it reports them.
func FailedJobs(js *jobsetv1alpha2.JobSet) []string {
	if js == nil {
		return nil
	}
	var out []string
	for _, s := range js.Status.ReplicatedJobsStatus {
		if s.Failed > 0 {
			out = append(out, s.Name)
		}
	}
	return out
}

// AllReady reports whether the JobSet counts every Job of a replicated job
// ready or done (a Job is ready when all its pods are ready or done).
func AllReady(js *jobsetv1alpha2.JobSet, rjob string) bool {
	if js == nil {
		return false
	}
	for _, rj := range js.Spec.ReplicatedJobs {
		if rj.Name != rjob {
			continue
		}
		for _, s := range js.Status.ReplicatedJobsStatus {
			if s.Name == rjob {
				return s.Ready+s.Succeeded >= max(rj.Replicas, 1)
			}
		}
	}
	return false
}
