package pytorchjob

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/childsync"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
	"github.com/trainyard/trainyard/pkg/observe"
)

// now is the time of every pass; v1 times have second precision, so status
// times are now truncated to the second.
var (
	now     = time.Date(2026, 3, 1, 12, 0, 0, 500_000_000, time.UTC)
	nowSec  = metav1.NewTime(now.Truncate(time.Second))
	ago     = func(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Truncate(time.Second).Add(-d)); return &t }
	nowText = nowSec.UTC().Format(time.RFC3339)
)

// newAdapter is the adapter as SetupWithManager builds it.
func newAdapter(t *testing.T) Adapter {
	t.Helper()
	fw, err := NewFramework()
	if err != nil {
		t.Fatal(err)
	}
	return Adapter{Framework: fw}
}

// Job mutators.
func suspend(j *kubeflowv1.PyTorchJob) { j.Spec.RunPolicy.Suspend = ptr.To(true) }

func deadlineSeconds(s int64) func(*kubeflowv1.PyTorchJob) {
	return func(j *kubeflowv1.PyTorchJob) { j.Spec.RunPolicy.ActiveDeadlineSeconds = ptr.To(s) }
}

func ttlSeconds(s int32) func(*kubeflowv1.PyTorchJob) {
	return func(j *kubeflowv1.PyTorchJob) { j.Spec.RunPolicy.TTLSecondsAfterFinished = ptr.To(s) }
}

func cleanPodPolicy(p kubeflowv1.CleanPodPolicy) func(*kubeflowv1.PyTorchJob) {
	return func(j *kubeflowv1.PyTorchJob) { j.Spec.RunPolicy.CleanPodPolicy = ptr.To(p) }
}

func startedAt(t *metav1.Time) func(*kubeflowv1.PyTorchJob) {
	return func(j *kubeflowv1.PyTorchJob) { j.Status.StartTime = t }
}

func completedAt(t *metav1.Time) func(*kubeflowv1.PyTorchJob) {
	return func(j *kubeflowv1.PyTorchJob) { j.Status.CompletionTime = t }
}

// cond adds a condition as an earlier pass left it.
func cond(t kubeflowv1.JobConditionType, status corev1.ConditionStatus, reason string) func(*kubeflowv1.PyTorchJob) {
	return func(j *kubeflowv1.PyTorchJob) {
		at := *ago(time.Hour)
		j.Status.Conditions = append(j.Status.Conditions, kubeflowv1.JobCondition{
			Type: t, Status: status, Reason: reason, Message: "earlier", LastUpdateTime: at, LastTransitionTime: at,
		})
	}
}

var created = cond(kubeflowv1.JobCreated, corev1.ConditionTrue, ReasonCreated)

func replicaStatus(rtype kubeflowv1.ReplicaType, active, succeeded, failed int32) func(*kubeflowv1.PyTorchJob) {
	return func(j *kubeflowv1.PyTorchJob) {
		if j.Status.ReplicaStatuses == nil {
			j.Status.ReplicaStatuses = map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaStatus{}
		}
		j.Status.ReplicaStatuses[rtype] = &kubeflowv1.ReplicaStatus{Active: active, Succeeded: succeeded, Failed: failed, Selector: RoleSelector(j.Name, rtype)}
	}
}

// jobSet is the JobSet of mnist, with its JobSet conditions.
func jobSet(conds ...metav1.Condition) *jobsetv1alpha2.JobSet {
	return &jobsetv1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mnist", UID: "js-uid"},
		Status:     jobsetv1alpha2.JobSetStatus{Conditions: conds},
	}
}

func jobSetCond(t jobsetv1alpha2.JobSetConditionType, msg string) metav1.Condition {
	return metav1.Condition{Type: string(t), Status: metav1.ConditionTrue, Reason: "r", Message: msg}
}

func serviceOf(name string, deleting bool) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}}
	if deleting {
		s.DeletionTimestamp = ago(time.Second)
		s.Finalizers = []string{"x"}
	}
	return s
}

// pod is a pod of mnist's JobSet (js-uid) in one role.
func pod(name string, rtype kubeflowv1.ReplicaType, phase corev1.PodPhase, mutate ...func(*corev1.Pod)) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{
			jobsetv1alpha2.JobSetNameKey:        "mnist",
			jobsetv1alpha2.JobSetUIDKey:         "js-uid",
			kubeflowv1.ReplicaTypeLabel:         strings.ToLower(string(rtype)),
			LegacyJobNameLabel:                  "mnist-" + strings.ToLower(string(rtype)) + "-0", // set by the batch Job
			kubeflowv1.OperatorNameLabel:        OperatorName,
			jobsetv1alpha2.ReplicatedJobNameKey: strings.ToLower(string(rtype)),
		}},
		Status: corev1.PodStatus{Phase: phase},
	}
	for _, m := range mutate {
		m(&p)
	}
	return p
}

func relabelled(p *corev1.Pod) { p.Labels[LegacyJobNameLabel] = "mnist" }

func deleting(p *corev1.Pod) { p.DeletionTimestamp = ago(time.Second) }

func otherJobSet(p *corev1.Pod) { p.Labels[jobsetv1alpha2.JobSetUIDKey] = "old-js-uid" }

// observed returns what a pass saw: the JobSet (nil: none), Services, pods.
func observed(js *jobsetv1alpha2.JobSet, svcs []*corev1.Service, pods ...corev1.Pod) *observe.Observed {
	o := &observe.Observed{Children: childsync.Children{}, Pods: pods}
	if js != nil {
		o.Children[childsync.Key{GroupKind: observe.JobSetKind, Name: js.Name}] = js
	}
	for _, s := range svcs {
		o.Children[childsync.Key{GroupKind: schema.GroupKind{Kind: "Service"}, Name: s.Name}] = s
	}
	return o
}

// synced is a Sync whose plan ran and did action to the JobSet; the JobSet is
// then js.
func synced(action childsync.Action, js *jobsetv1alpha2.JobSet) jobframework.Sync {
	s := jobframework.Sync{Planned: true, Result: childsync.Result{Actions: map[childsync.Key]childsync.Action{}, Children: childsync.Children{}}}
	key := childsync.Key{GroupKind: observe.JobSetKind, Name: "mnist"}
	if action != childsync.None {
		s.Result.Actions[key] = action
	}
	if js != nil {
		s.Result.Children[key] = js
	}
	return s
}

// summary is a Decision in a form that diffs well: the events in the order
// a pass that writes the status sends them.
type summary struct {
	Conditions     []string
	Replicas       map[kubeflowv1.ReplicaType]string
	StartTime      string
	CompletionTime string
	Events         []jobframework.Event
	Delete         []string
	Patches        []string
	Requeue        time.Duration
	Retry          string
	DeferStatus    bool
}

func timeText(t *metav1.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func summarize(out jobframework.Decision) summary {
	var s summary
	if job, ok := out.Job.(*kubeflowv1.PyTorchJob); ok && job != nil {
		for _, c := range job.Status.Conditions {
			s.Conditions = append(s.Conditions, fmt.Sprintf("%s=%s %s", c.Type, c.Status, c.Reason))
		}
		if len(job.Status.ReplicaStatuses) > 0 {
			s.Replicas = map[kubeflowv1.ReplicaType]string{}
			for t, rs := range job.Status.ReplicaStatuses {
				s.Replicas[t] = fmt.Sprintf("active=%d succeeded=%d failed=%d", rs.Active, rs.Succeeded, rs.Failed)
			}
		}
		s.StartTime = timeText(job.Status.StartTime)
		s.CompletionTime = timeText(job.Status.CompletionTime)
	}
	s.Events = append(append([]jobframework.Event(nil), out.SyncEvents...), out.Events...)
	for _, o := range out.Delete {
		s.Delete = append(s.Delete, fmt.Sprintf("%T %s", o, o.GetName()))
	}
	for _, p := range out.Patches {
		s.Patches = append(s.Patches, p.Object.GetName()+" "+string(p.Data))
	}
	s.Requeue = out.Requeue
	if out.Retry != nil {
		s.Retry = out.Retry.Error()
	}
	s.DeferStatus = out.Defer
	return s
}

// sortedNames lists the names of objs, sorted.
func sortedNames(objs []client.Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, fmt.Sprintf("%T %s", o, o.GetName()))
	}
	sort.Strings(out)
	return out
}

func childKey(kind, name string) childsync.Key {
	return childsync.Key{GroupKind: schema.GroupKind{Kind: kind}, Name: name}
}
