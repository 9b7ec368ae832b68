package pytorchjob

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
	"github.com/trainyard/trainyard/pkg/observe"
	"github.com/trainyard/trainyard/pkg/plan"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
)

// planSummary lists a plan's children as "<Go type> <name> <rule>".
func planSummary(p *plan.Plan) []string {
	if p == nil {
		return nil
	}
	var out []string
	for _, c := range p.Children {
		out = append(out, fmt.Sprintf("%T %s %s", c.Object, c.Object.GetName(), c.Rule))
	}
	return out
}

func TestPlan(t *testing.T) {
	a := newAdapter(t)
	running := []string{
		"*v1.Service mnist-master-0 CreateOnce",
		"*v1.Service mnist-worker-0 CreateOnce",
		"*v1.Service mnist-worker-1 CreateOnce",
		"*v1alpha2.JobSet mnist JobSet",
	}
	cases := map[string]struct {
		job           *kubeflowv1.PyTorchJob
		want          []string
		wantSuspended bool
		wantInvalid   string
	}{
		"succeeded: nothing": {
			job: mnist(2, created, cond(kubeflowv1.JobSucceeded, corev1.ConditionTrue, ReasonSucceeded)),
		},
		"failed: nothing": {
			job: mnist(2, created, cond(kubeflowv1.JobFailed, corev1.ConditionTrue, ReasonFailed)),
		},
		"invalid: InvalidError": {
			job: mnist(2, func(j *kubeflowv1.PyTorchJob) {
				j.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeMaster].Replicas = ptr.To[int32](2)
			}),
			wantInvalid: "spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1",
		},
		"invalid run policy: InvalidError": {
			job:         mnist(2, deadlineSeconds(0)),
			wantInvalid: "spec.runPolicy.activeDeadlineSeconds",
		},
		"past its deadline: nothing": {
			job: mnist(2, created, deadlineSeconds(60), startedAt(ago(61*time.Second))),
		},
		"at its deadline: nothing": {
			job: mnist(2, created, deadlineSeconds(60), startedAt(ago(60*time.Second))),
		},
		"before its deadline: Services, then the JobSet": {
			job:  mnist(2, created, deadlineSeconds(60), startedAt(ago(59*time.Second))),
			want: running,
		},
		"deadline of a job that never started counts from now": {
			job:  mnist(2, deadlineSeconds(1)),
			want: running,
		},
		"past its deadline while suspended: planned, suspended": {
			job:           mnist(2, created, suspend, deadlineSeconds(60), startedAt(ago(time.Hour))),
			want:          running,
			wantSuspended: true,
		},
		"resumed past its old deadline: counts from now": {
			job: mnist(2, created, deadlineSeconds(60), startedAt(ago(time.Hour)),
				cond(kubeflowv1.JobSuspended, corev1.ConditionTrue, ReasonSuspended)),
			want: running,
		},
		"valid: Services, then the JobSet": {
			job:  mnist(2),
			want: running,
		},
		"suspended: planned, suspended": {
			job:           mnist(1, suspend),
			want:          []string{"*v1.Service mnist-master-0 CreateOnce", "*v1.Service mnist-worker-0 CreateOnce", "*v1alpha2.JobSet mnist JobSet"},
			wantSuspended: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := tc.job.DeepCopy()
			p, err := jobframework.PlanFor(a, tc.job, &observe.Observed{}, now)
			if tc.wantInvalid != "" {
				var ie *framework.InvalidError
				if !errors.As(err, &ie) {
					t.Fatalf("Plan error %v, want an *InvalidError", err)
				}
				if !strings.Contains(err.Error(), tc.wantInvalid) {
					t.Errorf("Plan error %q, want it to contain %q", err, tc.wantInvalid)
				}
				if p != nil {
					t.Errorf("Plan returned a plan with its error")
				}
				return
			}
			if err != nil {
				t.Fatalf("Plan: %v", err)
			}
			if diff := cmp.Diff(tc.want, planSummary(p)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			if p != nil {
				if p.Suspended != tc.wantSuspended {
					t.Errorf("plan suspended = %v, want %v", p.Suspended, tc.wantSuspended)
				}
				if js := p.JobSet(); ptr.Deref(js.Spec.Suspend, false) != tc.wantSuspended {
					t.Errorf("JobSet suspend = %v, want %v", js.Spec.Suspend, tc.wantSuspended)
				}
			}
			if diff := cmp.Diff(before, tc.job); diff != "" {
				t.Errorf("Plan changed the job (-before +after):\n%s", diff)
			}
		})
	}
}

func TestAdapterIdentity(t *testing.T) {
	a := Adapter{}
	if got := a.Kind(); got != "PyTorchJob" {
		t.Errorf("Kind = %q", got)
	}
	if _, ok := a.New().(*kubeflowv1.PyTorchJob); !ok {
		t.Errorf("New = %T, want *PyTorchJob", a.New())
	}
	cases := map[string]struct {
		managedBy *string
		want      bool
	}{
		"unset":       {nil, true},
		"v1 operator": {ptr.To(kubeflowv1.KubeflowJobsController), true},
		"MultiKueue":  {ptr.To(kubeflowv1.MultiKueueController), false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := mnist(1, func(j *kubeflowv1.PyTorchJob) { j.Spec.RunPolicy.ManagedBy = tc.managedBy })
			if got := a.Ours(job); got != tc.want {
				t.Errorf("Ours = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestStartRun(t *testing.T) {
	suspendedCond := kubeflowv1.JobCondition{Type: kubeflowv1.JobSuspended, Status: corev1.ConditionTrue}
	resumedCond := kubeflowv1.JobCondition{Type: kubeflowv1.JobSuspended, Status: corev1.ConditionFalse}
	cases := map[string]struct {
		status      kubeflowv1.JobStatus
		suspended   bool
		wantStart   *metav1.Time
		wantResumed bool
	}{
		"first unsuspended pass":   {status: kubeflowv1.JobStatus{}, wantStart: &nowSec},
		"suspended: not started":   {status: kubeflowv1.JobStatus{}, suspended: true},
		"suspended: start kept":    {status: kubeflowv1.JobStatus{StartTime: ago(time.Hour)}, suspended: true, wantStart: ago(time.Hour)},
		"running: start kept":      {status: kubeflowv1.JobStatus{StartTime: ago(time.Hour), Conditions: []kubeflowv1.JobCondition{resumedCond}}, wantStart: ago(time.Hour)},
		"resumed: start reset":     {status: kubeflowv1.JobStatus{StartTime: ago(time.Hour), Conditions: []kubeflowv1.JobCondition{suspendedCond}}, wantStart: &nowSec, wantResumed: true},
		"resumed, never started":   {status: kubeflowv1.JobStatus{Conditions: []kubeflowv1.JobCondition{suspendedCond}}, wantStart: &nowSec, wantResumed: true},
		"still suspended: nothing": {status: kubeflowv1.JobStatus{Conditions: []kubeflowv1.JobCondition{suspendedCond}}, suspended: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st := tc.status.DeepCopy()
			resumed := startRun(st, tc.suspended, passTime(now))
			if resumed != tc.wantResumed {
				t.Errorf("resumed = %v, want %v", resumed, tc.wantResumed)
			}
			if diff := cmp.Diff(tc.wantStart, st.StartTime); diff != "" {
				t.Errorf("startTime (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDeadline(t *testing.T) {
	start := ago(time.Minute)
	cases := map[string]struct {
		ads    *int64
		start  *metav1.Time
		want   time.Time
		wantOK bool
	}{
		"no deadline":    {nil, start, time.Time{}, false},
		"not started":    {ptr.To[int64](30), nil, time.Time{}, false},
		"from the start": {ptr.To[int64](30), start, start.Add(30 * time.Second), true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := mnist(1, func(j *kubeflowv1.PyTorchJob) { j.Spec.RunPolicy.ActiveDeadlineSeconds = tc.ads })
			got, ok := deadline(job, &kubeflowv1.JobStatus{StartTime: tc.start})
			if ok != tc.wantOK || !got.Equal(tc.want) {
				t.Errorf("deadline = %v, %v; want %v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestPassTime(t *testing.T) {
	if diff := cmp.Diff(nowSec, passTime(now)); diff != "" {
		t.Errorf("passTime (-want +got):\n%s", diff)
	}
}

// The adapter satisfies the generic reconciler's contract for an unchanged
// job: a second Status over what the first one wrote changes nothing.
func TestStatusIsStable(t *testing.T) {
	js := jobSet()
	obs := observed(js, nil, pod("mnist-master-0", kubeflowv1.PyTorchJobReplicaTypeMaster, corev1.PodRunning, relabelled))
	first := Adapter{}.Status(mnist(1), obs, synced("", js), now)
	job := first.Job.(*kubeflowv1.PyTorchJob)
	second := Adapter{}.Status(job, obs, synced("", js), now.Add(time.Minute))
	if diff := cmp.Diff(job.Status, second.Job.(*kubeflowv1.PyTorchJob).Status); diff != "" {
		t.Errorf("status changed on a pass with nothing new (-first +second):\n%s", diff)
	}
	if len(second.Events) != 0 {
		t.Errorf("events on a pass with nothing new: %v", second.Events)
	}
}
