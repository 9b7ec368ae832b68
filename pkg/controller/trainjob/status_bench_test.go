package trainjob

import (
	"testing"
	"time"

	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/trainyard/trainyard/pkg/observe"
)

// BenchmarkStatus is the manager's CPU work per pass over a TrainJob once its
// JobSet exists: the status from the JobSet and the trainer pods, the events,
// and what the reconciler decides from the outcome (whether it changed, and
// whether in counts only). Every pod or JobSet event of a running job costs
// one such pass.
func BenchmarkStatus(b *testing.B) {
	js := jobSet(b, false, jsReplicated(jobsetv1alpha2.ReplicatedJobStatus{Name: "node", Active: 1}))
	done := jobSet(b, false, jsReplicated(jobsetv1alpha2.ReplicatedJobStatus{Name: "node", Succeeded: 1}),
		jsCondition(jobsetv1alpha2.JobSetCompleted, "AllJobsCompleted", "jobset completed successfully", tNow.Add(-time.Minute)))
	cases := []struct {
		name string
		obs  *observe.Observed
	}{
		// A node gets ready: a change of counts.
		{"Pending", observed(js, readyPod(0))},
		// The last node gets ready: Pending to Running.
		{"Running", observed(js, readyPod(0), readyPod(1))},
		// The JobSet completes.
		{"Complete", observed(done, donePod(0), donePod(1))},
	}
	a := newAdapter(b)
	job := newJob(withStatus(waiting(0)))
	for _, tc := range cases {
		sync := synced(tc.obs, nil, nil)
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				out := a.Status(job, tc.obs, sync, tNow)
				if out.Job == nil {
					b.Fatal("no job in the outcome")
				}
			}
		})
	}
}
