package pytorchjob

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/childsync"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
	"github.com/trainyard/trainyard/pkg/observe"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
)

// Condition summaries.
const (
	cCreated          = "Created=True PyTorchJobCreated"
	cRunning          = "Running=True PyTorchJobRunning"
	cRunningSuspended = "Running=False PyTorchJobSuspended"
	cRunningDone      = "Running=False PyTorchJobRunning"
	cRestarting       = "Restarting=True PyTorchJobRestarting"
	cSuspended        = "Suspended=True PyTorchJobSuspended"
	cResumed          = "Suspended=False PyTorchJobResumed"
	cSucceeded        = "Succeeded=True PyTorchJobSucceeded"
	cFailed           = "Failed=True PyTorchJobFailed"
	cFailedValidation = "Failed=True PyTorchJobFailedValidation"
)

func ev(typ, reason, action, msg string) jobframework.Event {
	return jobframework.Event{Type: typ, Reason: reason, Action: action, Message: msg}
}

var (
	evJobSetCreated = ev("Normal", EventJobSetCreated, "Create", "Created JobSet mnist")
	evSuspended     = ev("Normal", ReasonSuspended, "Suspend", "PyTorchJob mnist is suspended.")
	evResumed       = ev("Normal", ReasonResumed, "Resume", "PyTorchJob mnist is resumed.")
	evDeadline      = ev("Warning", ReasonFailed, "Fail", "Job mnist has failed because it was active longer than specified deadline")
)

func replicas(master, worker string) map[kubeflowv1.ReplicaType]string {
	return map[kubeflowv1.ReplicaType]string{kubeflowv1.PyTorchJobReplicaTypeMaster: master, kubeflowv1.PyTorchJobReplicaTypeWorker: worker}
}

const none = "active=0 succeeded=0 failed=0"

func TestStatus(t *testing.T) {
	errAPI := errors.New("apiserver unavailable")
	js := jobSet()
	svcs := []*corev1.Service{serviceOf("mnist-master-0", false), serviceOf("mnist-worker-0", true)}
	masterRunning := pod("mnist-master-0", kubeflowv1.PyTorchJobReplicaTypeMaster, corev1.PodRunning)
	workerRunning := pod("mnist-worker-0", kubeflowv1.PyTorchJobReplicaTypeWorker, corev1.PodRunning, relabelled)
	cases := map[string]struct {
		job  *kubeflowv1.PyTorchJob
		obs  *observe.Observed
		sync jobframework.Sync
		want summary
	}{
		"JobSet created": {
			job:  mnist(1),
			obs:  observed(nil, nil),
			sync: synced(childsync.Created, js),
			want: summary{
				Conditions:  []string{cCreated},
				Replicas:    replicas(none, none),
				StartTime:   nowText,
				Events:      []jobframework.Event{evJobSetCreated},
				DeferStatus: true, // the JobSet's creation event brings the write
			},
		},
		"JobSet created, restart policy in a pod template and a deprecated field: warnings": {
			job: mnist(1, func(j *kubeflowv1.PyTorchJob) {
				j.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeMaster].Template.Spec.RestartPolicy = corev1.RestartPolicyNever
				j.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeWorker].Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
				j.Spec.ElasticPolicy = &kubeflowv1.ElasticPolicy{NProcPerNode: ptr.To[int32](2)}
			}),
			obs:  observed(nil, nil),
			sync: synced(childsync.Created, js),
			want: summary{
				Conditions: []string{cCreated},
				Replicas:   replicas(none, none),
				StartTime:  nowText,
				Events: []jobframework.Event{
					evJobSetCreated,
					ev("Warning", EventTemplateRestartPol, "Create", "Master: "+msgTemplateRestartPolicy),
					ev("Warning", EventTemplateRestartPol, "Create", "Worker: "+msgTemplateRestartPolicy),
					ev("Warning", EventDeprecatedField, "Create", "spec.elasticPolicy.nProcPerNode is deprecated, use spec.nprocPerNode instead"),
				},
				DeferStatus: true, // the JobSet's creation event brings the write
			},
		},
		"JobSet recreated": {
			job:  mnist(1, created, suspend, cond(kubeflowv1.JobSuspended, "True", ReasonSuspended)),
			obs:  observed(js, nil),
			sync: synced(childsync.Recreated, js),
			want: summary{
				Conditions: []string{cCreated, cSuspended},
				Replicas:   replicas(none, none),
				Events:     []jobframework.Event{ev("Normal", EventJobSetRecreated, "Create", "Recreated suspended JobSet mnist: its immutable template changed")},
			},
		},
		"JobSet updated": {
			job:  mnist(1, created, suspend, cond(kubeflowv1.JobSuspended, "True", ReasonSuspended)),
			obs:  observed(js, nil),
			sync: synced(childsync.Updated, js),
			want: summary{
				Conditions: []string{cCreated, cSuspended},
				Replicas:   replicas(none, none),
				Events:     []jobframework.Event{ev("Normal", EventJobSetUpdated, "Update", "Updated suspended JobSet mnist")},
			},
		},
		"created suspended: Suspended, not started": {
			job:  mnist(1, suspend),
			obs:  observed(nil, nil),
			sync: synced(childsync.Created, js),
			want: summary{
				Conditions:  []string{cCreated, cSuspended},
				Replicas:    replicas(none, none),
				Events:      []jobframework.Event{evJobSetCreated, evSuspended},
				DeferStatus: true, // the JobSet's creation event brings the write
			},
		},
		"suspending a running job: Running turns False, active pods no longer count": {
			job: mnist(2, created, suspend, startedAt(ago(time.Hour)),
				cond(kubeflowv1.JobRunning, "True", ReasonRunning),
				replicaStatus(kubeflowv1.PyTorchJobReplicaTypeMaster, 1, 0, 0),
				replicaStatus(kubeflowv1.PyTorchJobReplicaTypeWorker, 1, 1, 1)),
			obs:  observed(js, nil, masterRunning, workerRunning),
			sync: synced(childsync.Suspended, js),
			want: summary{
				Conditions: []string{cCreated, cRunningSuspended, cSuspended},
				Replicas:   replicas(none, "active=0 succeeded=1 failed=1"),
				StartTime:  timeText(ago(time.Hour)),
				Events:     []jobframework.Event{evSuspended},
				// Pods still there are labelled like any other.
				Patches: []string{`mnist-master-0 {"metadata":{"labels":{"job-name":"mnist"}}}`},
			},
		},
		"still suspended: no new event": {
			job:  mnist(1, created, suspend, cond(kubeflowv1.JobSuspended, "True", ReasonSuspended)),
			obs:  observed(js, nil),
			sync: synced(childsync.None, js),
			want: summary{
				Conditions: []string{cCreated, cSuspended},
				Replicas:   replicas(none, none),
			},
		},
		"resumed: Suspended turns False, start time reset": {
			job:  mnist(1, created, startedAt(ago(time.Hour)), cond(kubeflowv1.JobSuspended, "True", ReasonSuspended)),
			obs:  observed(js, nil),
			sync: synced(childsync.Resumed, js),
			want: summary{
				Conditions: []string{cCreated, cResumed},
				Replicas:   replicas(none, none),
				StartTime:  nowText,
				Events:     []jobframework.Event{evResumed},
			},
		},
		"past its deadline: fails, deletes the JobSet and the live Services, requeues for the TTL": {
			job:  mnist(1, created, deadlineSeconds(60), ttlSeconds(30), startedAt(ago(2*time.Minute))),
			obs:  observed(js, svcs, masterRunning),
			sync: jobframework.Sync{},
			want: summary{
				Conditions:     []string{cCreated, cFailed},
				StartTime:      timeText(ago(2 * time.Minute)),
				CompletionTime: nowText,
				Events:         []jobframework.Event{evDeadline},
				Delete:         []string{"*v1alpha2.JobSet mnist", "*v1.Service mnist-master-0"},
				Requeue:        29*time.Second + 500*time.Millisecond, // the TTL counts from the pass, not its second
			},
		},
		"past its deadline without a JobSet or TTL": {
			job:  mnist(1, created, deadlineSeconds(60), startedAt(ago(2*time.Minute))),
			obs:  observed(nil, nil),
			sync: jobframework.Sync{},
			want: summary{
				Conditions:     []string{cCreated, cFailed},
				StartTime:      timeText(ago(2 * time.Minute)),
				CompletionTime: nowText,
				Events:         []jobframework.Event{evDeadline},
			},
		},
		"past its deadline while suspended: not failed": {
			job:  mnist(1, created, suspend, deadlineSeconds(60), startedAt(ago(2*time.Minute)), cond(kubeflowv1.JobSuspended, "True", ReasonSuspended)),
			obs:  observed(js, nil),
			sync: synced(childsync.None, js),
			want: summary{
				Conditions: []string{cCreated, cSuspended},
				Replicas:   replicas(none, none),
				StartTime:  timeText(ago(2 * time.Minute)),
			},
		},
		"before its deadline: requeued for it": {
			job:  mnist(1, created, deadlineSeconds(100), startedAt(ago(40*time.Second))),
			obs:  observed(js, nil),
			sync: synced(childsync.None, js),
			want: summary{
				Conditions: []string{cCreated},
				Replicas:   replicas(none, none),
				StartTime:  timeText(ago(40 * time.Second)),
				Requeue:    59*time.Second + 500*time.Millisecond,
			},
		},
		"fails validation: Failed, requeued for the TTL": {
			job: mnist(1, ttlSeconds(45), func(j *kubeflowv1.PyTorchJob) {
				j.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeMaster].Replicas = ptr.To[int32](2)
			}),
			obs:  observed(nil, nil),
			sync: jobframework.Sync{Err: &framework.InvalidError{}}, // Plan's error; validation says more
			want: summary{
				Conditions:     []string{cCreated, cFailedValidation},
				CompletionTime: nowText,
				Events: []jobframework.Event{ev("Warning", ReasonFailedValidation, "Fail",
					"PyTorchJob mnist failed validation because spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1")},
				Requeue: 44*time.Second + 500*time.Millisecond,
			},
		},
		"pipeline rejects the job: Failed": {
			job: mnist(1),
			obs: observed(nil, nil),
			sync: jobframework.Sync{Err: fmt.Errorf("building: %w", &framework.InvalidError{Errs: field.ErrorList{
				field.Invalid(field.NewPath("spec", "x"), "y", "no good")}})},
			want: summary{
				Conditions:     []string{cCreated, cFailedValidation},
				StartTime:      nowText,
				CompletionTime: nowText,
				Events: []jobframework.Event{ev("Warning", ReasonFailedValidation, "Fail",
					`PyTorchJob mnist failed validation because building: spec.x: Invalid value: "y": no good`)},
			},
		},
		"JobSet name taken by someone else: event, look again in a minute": {
			job:  mnist(1),
			obs:  observed(nil, nil),
			sync: jobframework.Sync{Planned: true, Err: fmt.Errorf("%w: JobSet ns/mnist already exists", childsync.ErrNotOwned)},
			want: summary{
				Conditions: []string{cCreated},
				StartTime:  nowText,
				Events:     []jobframework.Event{ev("Warning", EventJobSetNotOwned, "Sync", "child not owned: JobSet ns/mnist already exists")},
				Requeue:    time.Minute,
			},
		},
		"JobSet exists, the cache has not seen it: retried, as every transient error": {
			job: mnist(1),
			obs: observed(nil, nil),
			sync: jobframework.Sync{Planned: true, Err: fmt.Errorf("creating JobSet mnist: %w",
				apierrors.NewAlreadyExists(schema.GroupResource{Group: "jobset.x-k8s.io", Resource: "jobsets"}, "mnist"))},
			want: summary{
				Conditions: []string{cCreated},
				StartTime:  nowText,
				Retry:      `creating JobSet mnist: jobsets.jobset.x-k8s.io "mnist" already exists`,
			},
		},
		"transient error: retried after the status write": {
			job:  mnist(1),
			obs:  observed(nil, nil),
			sync: jobframework.Sync{Planned: true, Err: errAPI},
			want: summary{
				Conditions: []string{cCreated},
				StartTime:  nowText,
				Retry:      "apiserver unavailable",
			},
		},
		"Master running: Running; pods lacking job-name get it": {
			job: mnist(2, created, startedAt(ago(time.Minute))),
			obs: observed(js, nil,
				masterRunning,
				workerRunning,
				pod("mnist-worker-1", kubeflowv1.PyTorchJobReplicaTypeWorker, corev1.PodPending),
				pod("mnist-worker-1-old", kubeflowv1.PyTorchJobReplicaTypeWorker, corev1.PodSucceeded, deleting),
				pod("mnist-worker-0-earlier", kubeflowv1.PyTorchJobReplicaTypeWorker, corev1.PodFailed, otherJobSet),
			),
			sync: synced(childsync.None, js),
			want: summary{
				Conditions: []string{cCreated, cRunning},
				Replicas:   replicas("active=1 succeeded=0 failed=0", "active=1 succeeded=1 failed=0"),
				StartTime:  timeText(ago(time.Minute)),
				Patches: []string{
					`mnist-master-0 {"metadata":{"labels":{"job-name":"mnist"}}}`,
					`mnist-worker-1 {"metadata":{"labels":{"job-name":"mnist"}}}`,
				},
			},
		},
		"only workers running: not Running yet": {
			job:  mnist(1, created, startedAt(ago(time.Minute))),
			obs:  observed(js, nil, workerRunning),
			sync: synced(childsync.None, js),
			want: summary{
				Conditions: []string{cCreated},
				Replicas:   replicas(none, "active=1 succeeded=0 failed=0"),
				StartTime:  timeText(ago(time.Minute)),
			},
		},
		"a worker failed and restarts: Restarting, with a warning": {
			job: mnist(2, created, startedAt(ago(time.Minute)), cond(kubeflowv1.JobRunning, "True", ReasonRunning)),
			obs: observed(js, nil, masterRunning, workerRunning,
				pod("mnist-worker-1", kubeflowv1.PyTorchJobReplicaTypeWorker, corev1.PodFailed, relabelled)),
			sync: synced(childsync.None, js),
			want: summary{
				Conditions: []string{cCreated, cRestarting},
				Replicas:   replicas("active=1 succeeded=0 failed=0", "active=1 succeeded=0 failed=1"),
				StartTime:  timeText(ago(time.Minute)),
				Events:     []jobframework.Event{ev("Warning", ReasonRestarting, "Restart", "PyTorchJob mnist is restarting because 1 Worker replica(s) failed.")},
				Patches:    []string{`mnist-master-0 {"metadata":{"labels":{"job-name":"mnist"}}}`},
			},
		},
		"JobSet completed: Succeeded, active counted as succeeded, requeued for the TTL": {
			job: mnist(1, created, ttlSeconds(60), startedAt(ago(time.Minute)), cond(kubeflowv1.JobRunning, "True", ReasonRunning)),
			obs: observed(jobSet(jobSetCond(jobsetv1alpha2.JobSetCompleted, "done")), nil,
				pod("mnist-master-0", kubeflowv1.PyTorchJobReplicaTypeMaster, corev1.PodSucceeded, relabelled),
				pod("mnist-worker-0", kubeflowv1.PyTorchJobReplicaTypeWorker, corev1.PodRunning, relabelled)),
			sync: synced(childsync.None, jobSet(jobSetCond(jobsetv1alpha2.JobSetCompleted, "done"))),
			want: summary{
				Conditions:     []string{cCreated, cRunningDone, cSucceeded},
				Replicas:       replicas("active=0 succeeded=1 failed=0", "active=0 succeeded=1 failed=0"),
				StartTime:      timeText(ago(time.Minute)),
				CompletionTime: nowText,
				Events:         []jobframework.Event{ev("Normal", ReasonSucceeded, "Complete", "PyTorchJob mnist is successfully completed.")},
				Requeue:        59*time.Second + 500*time.Millisecond,
			},
		},
		// The pass that sees the failed JobSet once its pods are gone. (With
		// the failed pod still observed, see the report: Restarting is set too.)
		"JobSet failed, OnFailure: Failed by backoff": {
			job:  mnist(1, created, startedAt(ago(time.Minute)), cond(kubeflowv1.JobRunning, "True", ReasonRunning)),
			obs:  observed(nil, nil),
			sync: synced(childsync.None, failedJobSet("master")),
			want: summary{
				Conditions:     []string{cCreated, cRunningDone, cFailed},
				Replicas:       replicas(none, none),
				StartTime:      timeText(ago(time.Minute)),
				CompletionTime: nowText,
				Events:         []jobframework.Event{ev("Warning", ReasonFailed, "Fail", "Job mnist has failed because it has reached the specified backoff limit")},
			},
		},
		"JobSet failed, Never: Failed by the failed pods": {
			job: mnist(2, created, startedAt(ago(time.Minute)), cond(kubeflowv1.JobRunning, "True", ReasonRunning), func(j *kubeflowv1.PyTorchJob) {
				j.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeWorker].RestartPolicy = kubeflowv1.RestartPolicyNever
			}),
			obs: observed(nil, nil,
				pod("mnist-master-0", kubeflowv1.PyTorchJobReplicaTypeMaster, corev1.PodRunning, relabelled),
				pod("mnist-worker-0", kubeflowv1.PyTorchJobReplicaTypeWorker, corev1.PodFailed, relabelled),
				pod("mnist-worker-1", kubeflowv1.PyTorchJobReplicaTypeWorker, corev1.PodFailed, relabelled)),
			sync: synced(childsync.None, failedJobSet("worker-0", "worker-1")),
			want: summary{
				Conditions:     []string{cCreated, cRunningDone, cFailed},
				Replicas:       replicas("active=1 succeeded=0 failed=0", "active=0 succeeded=0 failed=2"),
				StartTime:      timeText(ago(time.Minute)),
				CompletionTime: nowText,
				Events:         []jobframework.Event{ev("Warning", ReasonFailed, "Fail", "PyTorchJob mnist is failed because 2 Worker replica(s) failed.")},
			},
		},
		"pods of the planned JobSet when sync left no children": {
			job:  mnist(1, created, startedAt(ago(time.Minute))),
			obs:  observed(js, nil, masterRunning),
			sync: jobframework.Sync{},
			want: summary{
				Conditions: []string{cCreated, cRunning},
				Replicas:   replicas("active=1 succeeded=0 failed=0", none),
				StartTime:  timeText(ago(time.Minute)),
				Patches:    []string{`mnist-master-0 {"metadata":{"labels":{"job-name":"mnist"}}}`},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := tc.job.DeepCopy()
			out := jobframework.Decide(Adapter{}, tc.job, tc.obs, tc.sync, now)
			if diff := cmp.Diff(tc.want, summarize(out)); diff != "" {
				t.Errorf("outcome (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tc.job); diff != "" {
				t.Errorf("Status changed its input (-before +after):\n%s", diff)
			}
			Adapter{}.RecordSync(tc.job, tc.sync, now)
			Adapter{}.RecordStatus(tc.job, out.Job, now)
		})
	}
}

// A finished job is cleaned up by cleanPodPolicy, then deleted past its TTL.
func TestStatusFinished(t *testing.T) {
	succeeded := cond(kubeflowv1.JobSucceeded, "True", ReasonSucceeded)
	failed := cond(kubeflowv1.JobFailed, "True", ReasonFailed)
	js := jobSet(jobSetCond(jobsetv1alpha2.JobSetCompleted, ""))
	obs := observed(js,
		[]*corev1.Service{serviceOf("mnist-master-0", false), serviceOf("mnist-worker-0", true)},
		pod("mnist-master-0", kubeflowv1.PyTorchJobReplicaTypeMaster, corev1.PodSucceeded),
		pod("mnist-worker-0", kubeflowv1.PyTorchJobReplicaTypeWorker, corev1.PodRunning),
		pod("mnist-worker-1", kubeflowv1.PyTorchJobReplicaTypeWorker, corev1.PodPending),
		pod("mnist-worker-2", kubeflowv1.PyTorchJobReplicaTypeWorker, corev1.PodFailed),
		pod("mnist-worker-3", kubeflowv1.PyTorchJobReplicaTypeWorker, corev1.PodRunning, deleting),
	)
	cases := map[string]struct {
		job         *kubeflowv1.PyTorchJob
		wantDelete  []string
		wantRequeue time.Duration
		wantReplica map[kubeflowv1.ReplicaType]string
		wantConds   []string
	}{
		"cleanPodPolicy unset (None): nothing deleted": {
			job:       mnist(4, created, succeeded, completedAt(ago(time.Minute))),
			wantConds: []string{cCreated, cSucceeded},
		},
		"None": {
			job:       mnist(4, created, failed, cleanPodPolicy(kubeflowv1.CleanPodPolicyNone), completedAt(ago(time.Minute))),
			wantConds: []string{cCreated, cFailed},
		},
		"Running: running and pending pods, and the live Services": {
			job: mnist(4, created, succeeded, cleanPodPolicy(kubeflowv1.CleanPodPolicyRunning), completedAt(ago(time.Minute))),
			wantDelete: []string{
				"*v1.Pod mnist-worker-0", "*v1.Pod mnist-worker-1", "*v1.Service mnist-master-0",
			},
			wantConds: []string{cCreated, cSucceeded},
		},
		"All: every live pod and the live Services": {
			job: mnist(4, created, failed, cleanPodPolicy(kubeflowv1.CleanPodPolicyAll), completedAt(ago(time.Minute))),
			wantDelete: []string{
				"*v1.Pod mnist-master-0", "*v1.Pod mnist-worker-0", "*v1.Pod mnist-worker-1", "*v1.Pod mnist-worker-2", "*v1.Service mnist-master-0",
			},
			wantConds: []string{cCreated, cFailed},
		},
		"TTL not yet due: requeued for it": {
			job:         mnist(4, created, succeeded, ttlSeconds(300), completedAt(ago(time.Minute))),
			wantRequeue: 4*time.Minute - 500*time.Millisecond,
			wantConds:   []string{cCreated, cSucceeded},
		},
		"TTL due: the job is deleted, after the clean-up": {
			job:        mnist(4, created, failed, ttlSeconds(60), cleanPodPolicy(kubeflowv1.CleanPodPolicyRunning), completedAt(ago(time.Minute))),
			wantDelete: []string{"*v1.Pod mnist-worker-0", "*v1.Pod mnist-worker-1", "*v1.Service mnist-master-0", "*v1.PyTorchJob mnist"},
			wantConds:  []string{cCreated, cFailed},
		},
		"TTL without completion time: kept": {
			job:       mnist(4, created, succeeded, ttlSeconds(0)),
			wantConds: []string{cCreated, cSucceeded},
		},
		"succeeded: active replicas counted as succeeded": {
			job: mnist(4, created, succeeded, completedAt(ago(time.Minute)),
				replicaStatus(kubeflowv1.PyTorchJobReplicaTypeMaster, 1, 0, 0),
				replicaStatus(kubeflowv1.PyTorchJobReplicaTypeWorker, 2, 1, 1)),
			wantReplica: replicas("active=0 succeeded=1 failed=0", "active=0 succeeded=3 failed=1"),
			wantConds:   []string{cCreated, cSucceeded},
		},
		"failed: active replicas kept": {
			job: mnist(4, created, failed, completedAt(ago(time.Minute)),
				replicaStatus(kubeflowv1.PyTorchJobReplicaTypeWorker, 2, 1, 1)),
			wantReplica: map[kubeflowv1.ReplicaType]string{kubeflowv1.PyTorchJobReplicaTypeWorker: "active=2 succeeded=1 failed=1"},
			wantConds:   []string{cCreated, cFailed},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out := jobframework.Decide(Adapter{}, tc.job, obs, jobframework.Sync{}, now)
			got := summarize(out)
			want := summary{
				Conditions:     tc.wantConds,
				Replicas:       tc.wantReplica,
				StartTime:      "",
				CompletionTime: timeText(ago(time.Minute)),
				Delete:         tc.wantDelete,
				Requeue:        tc.wantRequeue,
			}
			if tc.job.Status.CompletionTime == nil {
				want.CompletionTime = ""
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("outcome (-want +got):\n%s", diff)
			}
		})
	}
}

// failedJobSet is mnist's JobSet, failed, with one failed Job in each of the
// replicated jobs named.
func failedJobSet(rjobs ...string) *jobsetv1alpha2.JobSet {
	js := jobSet(jobSetCond(jobsetv1alpha2.JobSetFailed, "a job failed"))
	for _, n := range rjobs {
		js.Status.ReplicatedJobsStatus = append(js.Status.ReplicatedJobsStatus, jobsetv1alpha2.ReplicatedJobStatus{Name: n, Failed: 1})
	}
	return js
}
