package trainjob

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
	rtt "github.com/trainyard/trainyard/test/util/rtt"
)

// A JobSet that failed and went (its own ttlSecondsAfterFinished: 0, or a
// user) before the TrainJob's status said so: the job gets no new JobSet, and
// fails with the JobSet's reason; once its status is written, it is forgotten.
// Without the memory the pass plans a new JobSet (checked: it does).
func TestJobSetGoneBeforeStatusIsTerminal(t *testing.T) {
	scheme := k8sruntime.NewScheme()
	if err := trainer.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	r := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&trainer.ClusterTrainingRuntime{
		ObjectMeta: metav1.ObjectMeta{Name: rtt.TorchDistributed}, Spec: torchRuntime("img:1").Spec}).Build()
	for _, tc := range []struct {
		name, typ, reason string
		want              string
	}{
		{"failed", string(jobsetv1alpha2.JobSetFailed), "FailedJobs", trainer.TrainJobFailed},
		{"completed", string(jobsetv1alpha2.JobSetCompleted), "AllJobsCompleted", trainer.TrainJobComplete},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAdapter(t)
			a.gone = &finishedJobSets{}
			job := newJob(withStatus(running(time.Minute)))
			js := jobSet(t, false, jsCondition(jobsetv1alpha2.JobSetConditionType(tc.typ), tc.reason, "the JobSet's message", tCreated.Add(2*time.Minute)))
			js.OwnerReferences = []metav1.OwnerReference{{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind,
				Name: testName, UID: job.UID, Controller: ptr.To(true)}}
			if _, ok := a.gone.observe(js); !ok {
				t.Fatal("a finished JobSet of a TrainJob was not remembered")
			}

			// The JobSet is gone from the cache: no plan, and the job ends as its JobSet did.
			obs := observed(nil)
			p, err := planPass(t, a, r, job, obs, tNow)
			if err != nil || p != nil {
				t.Fatalf("plan %v, %v; want no plan (no new JobSet)", p, err)
			}
			out := a.Status(job, obs, jobframework.Sync{}, tNow)
			got := out.Job.(*trainer.TrainJob)
			c := meta.FindStatusCondition(got.Status.Conditions, tc.want)
			if c == nil || c.Status != metav1.ConditionTrue || c.Reason != tc.reason || c.Message != "the JobSet's message" {
				t.Fatalf("conditions %+v, want %s=True with the JobSet's reason and message", got.Status.Conditions, tc.want)
			}

			// Written: the next pass of the finished job forgets the JobSet.
			if _, err := planPass(t, a, r, got, observed(nil), tNow.Add(time.Second)); err != nil {
				t.Fatal(err)
			}
			if a.gone.get(job.UID) != nil {
				t.Error("the finished job's JobSet is still remembered")
			}
		})
	}

	// A JobSet that has not finished, or that no TrainJob controls, is not remembered.
	f := &finishedJobSets{}
	running := jobSet(t, false)
	running.OwnerReferences = []metav1.OwnerReference{{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind, Name: testName, UID: "u", Controller: ptr.To(true)}}
	orphan := jobSet(t, false, jsCondition(jobsetv1alpha2.JobSetFailed, "FailedJobs", "m", tNow))
	if _, ok := f.observe(running); ok {
		t.Error("a running JobSet was remembered")
	}
	if _, ok := f.observe(orphan); ok {
		t.Error("a JobSet no TrainJob controls was remembered")
	}
}
