package v1job

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/childsync"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
	"github.com/trainyard/trainyard/pkg/observe"
)

// testDef is a kind like XGBoostJob (its API type), described here.
var testDef = &Def{
	Kind: "XGBoostJob", Name: "xgboostjob", Resource: "xgboostjobs", OperatorName: "xgboostjob-controller",
	SpecsField: "xgbReplicaSpecs",
	Roles:      []kubeflowv1.ReplicaType{"Master", "Worker"}, Required: []kubeflowv1.ReplicaType{"Master"}, Single: []kubeflowv1.ReplicaType{"Master"},
	Container: "xgboost", PortName: "xgboostjob-port", Port: 9999, RestartPolicy: kubeflowv1.RestartPolicyNever,
	SuccessRole: "Master", MasterRole: "Master", Services: true,
	New: func() Job { return &kubeflowv1.XGBoostJob{} },
}

var (
	now    = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	nowSec = metav1.NewTime(now)
)

func job(mutate ...func(*kubeflowv1.XGBoostJob)) *kubeflowv1.XGBoostJob {
	spec := func(n int32, rp kubeflowv1.RestartPolicy) *kubeflowv1.ReplicaSpec {
		return &kubeflowv1.ReplicaSpec{Replicas: ptr.To(n), RestartPolicy: rp, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "xgboost", Image: "x"}}}}}
	}
	j := &kubeflowv1.XGBoostJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x"},
		Spec: kubeflowv1.XGBoostJobSpec{XGBReplicaSpecs: map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{
			"Master": spec(1, ""), "Worker": spec(2, kubeflowv1.RestartPolicyOnFailure)}}}
	for _, m := range mutate {
		m(j)
	}
	return j
}

func pod(rtype string, i int, phase corev1.PodPhase) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("x-%s-%d", rtype, i), UID: types.UID(rtype + fmt.Sprint(i)),
		Labels: map[string]string{jobsetv1alpha2.JobSetNameKey: "x", jobsetv1alpha2.JobSetUIDKey: "js", kubeflowv1.ReplicaTypeLabel: rtype}},
		Status: corev1.PodStatus{Phase: phase}}
}

func jobSet(conds ...jobsetv1alpha2.JobSetConditionType) *jobsetv1alpha2.JobSet {
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x", UID: "js"}}
	for _, c := range conds {
		js.Status.Conditions = append(js.Status.Conditions, metav1.Condition{Type: string(c), Status: metav1.ConditionTrue, Reason: "r", Message: "m"})
	}
	return js
}

func observed(js *jobsetv1alpha2.JobSet, pods ...corev1.Pod) (*observe.Observed, jobframework.Sync) {
	o := &observe.Observed{Children: childsync.Children{}, Pods: pods}
	key := childsync.Key{GroupKind: observe.JobSetKind, Name: "x"}
	o.Children[key] = js
	o.Children[childsync.Key{GroupKind: schema.GroupKind{Kind: "Service"}, Name: "x-master-0"}] = &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "x-master-0"}}
	return o, jobframework.Sync{Planned: true, Result: childsync.Result{Actions: map[childsync.Key]childsync.Action{}, Children: childsync.Children{key: js}}}
}

type summary struct {
	Conditions []string
	Replicas   map[kubeflowv1.ReplicaType]string
	Events     []string
	Delete     []string
	Completed  bool
}

func summarize(out jobframework.Outcome) summary {
	var s summary
	st := out.Job.(Job).JobStatus()
	for _, c := range st.Conditions {
		s.Conditions = append(s.Conditions, fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message))
	}
	if len(st.ReplicaStatuses) > 0 {
		s.Replicas = map[kubeflowv1.ReplicaType]string{}
		for t, r := range st.ReplicaStatuses {
			s.Replicas[t] = fmt.Sprintf("%d/%d/%d", r.Active, r.Succeeded, r.Failed)
		}
	}
	for _, e := range out.Events {
		s.Events = append(s.Events, e.Type+" "+e.Reason)
	}
	for _, o := range out.Delete {
		s.Delete = append(s.Delete, fmt.Sprintf("%T %s", o, o.GetName()))
	}
	s.Completed = st.CompletionTime != nil
	return s
}

func TestStatus(t *testing.T) {
	a := Adapter{Def: testDef}
	created := "Created=True XGBoostJobCreated: XGBoostJob x is created."
	cases := map[string]struct {
		job  *kubeflowv1.XGBoostJob
		js   *jobsetv1alpha2.JobSet
		pods []corev1.Pod
		sync func(*jobframework.Sync)
		want summary
	}{
		"master running: Running": {
			job: job(), js: jobSet(),
			pods: []corev1.Pod{pod("master", 0, corev1.PodRunning), pod("worker", 0, corev1.PodRunning), pod("worker", 1, corev1.PodPending)},
			want: summary{
				Conditions: []string{created, "Running=True XGBoostJobRunning: XGBoostJob x is running."},
				Replicas:   map[kubeflowv1.ReplicaType]string{"Master": "1/0/0", "Worker": "1/0/0"},
			},
		},
		"worker failed and restarts: Restarting, a Warning": {
			job: job(), js: jobSet(),
			pods: []corev1.Pod{pod("master", 0, corev1.PodRunning), pod("worker", 0, corev1.PodFailed), pod("worker", 1, corev1.PodRunning)},
			want: summary{
				Conditions: []string{created, "Restarting=True XGBoostJobRestarting: XGBoostJob x is restarting because 1 Worker replica(s) failed."},
				Replicas:   map[kubeflowv1.ReplicaType]string{"Master": "1/0/0", "Worker": "1/0/1"},
				Events:     []string{"Warning XGBoostJobRestarting"},
			},
		},
		"JobSet completed: Succeeded, active counted as succeeded": {
			job: job(), js: jobSet(jobsetv1alpha2.JobSetCompleted),
			pods: []corev1.Pod{pod("master", 0, corev1.PodSucceeded), pod("worker", 0, corev1.PodRunning)},
			want: summary{
				Conditions: []string{created, "Succeeded=True XGBoostJobSucceeded: XGBoostJob x is successfully completed."},
				Replicas:   map[kubeflowv1.ReplicaType]string{"Master": "0/1/0", "Worker": "0/1/0"},
				Events:     []string{"Normal XGBoostJobSucceeded"},
				Completed:  true,
			},
		},
		"JobSet failed, master Never: Failed with v1's message": {
			job: job(), js: jobSet(jobsetv1alpha2.JobSetFailed),
			pods: []corev1.Pod{pod("master", 0, corev1.PodFailed)},
			want: summary{
				Conditions: []string{created, "Failed=True XGBoostJobFailed: XGBoostJob x is failed because 1 Master replica(s) failed."},
				Replicas:   map[kubeflowv1.ReplicaType]string{"Master": "0/0/1", "Worker": "0/0/0"},
				Events:     []string{"Warning XGBoostJobFailed"},
				Completed:  true,
			},
		},
		"suspended: Suspended": {
			job: job(func(j *kubeflowv1.XGBoostJob) { j.Spec.RunPolicy.Suspend = ptr.To(true) }), js: jobSet(),
			want: summary{
				Conditions: []string{created, "Suspended=True XGBoostJobSuspended: XGBoostJob x is suspended."},
				Replicas:   map[kubeflowv1.ReplicaType]string{"Master": "0/0/0", "Worker": "0/0/0"},
				Events:     []string{"Normal XGBoostJobSuspended"},
			},
		},
		"invalid (webhooks off): Failed with the field error": {
			job: job(func(j *kubeflowv1.XGBoostJob) { delete(j.Spec.XGBReplicaSpecs, "Master") }), js: jobSet(),
			want: summary{
				Conditions: []string{created, "Failed=True XGBoostJobFailedValidation: XGBoostJob x failed validation because spec.xgbReplicaSpecs[Master]: Required value: a XGBoostJob must have a Master"},
				Events:     []string{"Warning XGBoostJobFailedValidation"},
				Completed:  true,
			},
		},
		"past the deadline: Failed, Services deleted": {
			job: job(), js: jobSet(),
			sync: func(s *jobframework.Sync) { s.DeadlineExceeded = true },
			want: summary{
				Conditions: []string{created, "Failed=True XGBoostJobFailed: Job x has failed because it was active longer than specified deadline"},
				Events:     []string{"Warning XGBoostJobFailed"},
				Delete:     []string{"*v1.Service x-master-0"},
				Completed:  true,
			},
		},
		"finished, cleanPodPolicy Running: running pods and Services deleted": {
			job: job(func(j *kubeflowv1.XGBoostJob) {
				j.Spec.RunPolicy.CleanPodPolicy = ptr.To(kubeflowv1.CleanPodPolicyRunning)
				j.Status.Conditions = []kubeflowv1.JobCondition{{Type: kubeflowv1.JobCreated, Status: "True", Reason: "XGBoostJobCreated", Message: "XGBoostJob x is created."},
					{Type: kubeflowv1.JobSucceeded, Status: "True", Reason: "XGBoostJobSucceeded", Message: "done"}}
			}), js: jobSet(jobsetv1alpha2.JobSetCompleted),
			pods: []corev1.Pod{pod("master", 0, corev1.PodSucceeded), pod("worker", 0, corev1.PodRunning)},
			want: summary{
				Conditions: []string{created, "Succeeded=True XGBoostJobSucceeded: done"},
				Delete:     []string{"*v1.Pod x-worker-0", "*v1.Service x-master-0"},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obs, sync := observed(tc.js, tc.pods...)
			if tc.sync != nil {
				tc.sync(&sync)
			}
			got := summarize(a.Status(tc.job, obs, sync, now))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSetCondition(t *testing.T) {
	st := &kubeflowv1.JobStatus{}
	SetCondition(st, kubeflowv1.JobRunning, "True", "R", "m", nowSec)
	SetCondition(st, kubeflowv1.JobRestarting, "True", "Re", "m", nowSec)
	if len(st.Conditions) != 1 || st.Conditions[0].Type != kubeflowv1.JobRestarting {
		t.Errorf("Restarting does not replace Running: %+v", st.Conditions)
	}
	SetCondition(st, kubeflowv1.JobFailed, "True", "F", "m", nowSec)
	if SetCondition(st, kubeflowv1.JobSucceeded, "True", "S", "m", nowSec) {
		t.Error("a Failed job changed")
	}
}

// A kind that fails on eviction (MPIJob) fails when its success role's pod
// is evicted, whatever its restart policy; others do not.
func TestEvicted(t *testing.T) {
	evicted := pod("master", 0, corev1.PodFailed)
	evicted.Status.Reason = "Evicted"
	for _, fail := range []bool{false, true} {
		d := *testDef
		d.FailOnEviction = fail
		obs, sync := observed(jobSet(), evicted)
		got := summarize(Adapter{Def: &d}.Status(job(), obs, sync, now))
		last := got.Conditions[len(got.Conditions)-1]
		if want := "Failed=True XGBoostJobEvicted: XGBoostJob x: the Master pod was evicted"; (last == want) != fail {
			t.Errorf("FailOnEviction %t: last condition %q", fail, last)
		}
	}
}
