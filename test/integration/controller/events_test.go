package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/eventrecorder"
)

func clientset(t *testing.T) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	return cs
}

// sdkEvents keeps the Events Kubeflow's Python SDK returns for a TrainJob
// (TrainerClient.get_job_events, kubeflow/sdk
// kubeflow/trainer/backends/kubernetes/backend.py): of the namespace's core/v1
// Events, those with metadata, an involved object and a first_timestamp, about
// a TrainJob, JobSet, Job or Pod named as one of the job's resources.
func sdkEvents(list []corev1.Event, resources ...string) []corev1.Event {
	names := map[string]bool{}
	for _, n := range resources {
		names[n] = true
	}
	var out []corev1.Event
	for _, e := range list {
		if e.Name == "" || e.InvolvedObject.Kind == "" || e.FirstTimestamp.IsZero() {
			continue
		}
		switch e.InvolvedObject.Kind {
		case trainer.TrainJobKind, "JobSet", "Job", "Pod":
			if names[e.InvolvedObject.Name] {
				out = append(out, e)
			}
		}
	}
	return out
}

// coreView is what a core/v1 reader goes by.
type coreView struct {
	Kind, Name, Type, Reason, Message, Action, Reporter string
	Count                                               int32
	// FirstTimestamp is eventTime in whole seconds; LastTimestamp is the
	// series' lastObservedTime on a repeat, else FirstTimestamp.
	FirstIsEventTime, LastFollows bool
}

func viewOf(e *corev1.Event) coreView {
	last := e.EventTime.Time
	if e.Series != nil {
		last = e.Series.LastObservedTime.Time
	}
	return coreView{Kind: e.InvolvedObject.Kind, Name: e.InvolvedObject.Name, Type: e.Type, Reason: e.Reason,
		Message: e.Message, Action: e.Action, Reporter: e.ReportingController, Count: e.Count,
		FirstIsEventTime: !e.EventTime.IsZero() && e.FirstTimestamp.Time.Equal(e.EventTime.Truncate(time.Second)),
		LastFollows:      !last.IsZero() && e.LastTimestamp.Time.Equal(last.Truncate(time.Second)),
	}
}

// The manager's events read through core/v1 as core/v1 readers expect, and
// so reach Kubeflow's SDK, which drops Events without firstTimestamp.
func TestEventsThroughCoreV1(t *testing.T) {
	ns := newNamespace(t)
	applyFile(t, ns, "runtimes/torch-distributed.yaml")
	require.NoError(t, env.Client.Create(ctx(), torchJob(ns, "seen", nil)))
	cs := clientset(t)

	var created *corev1.Event
	eventually(t, func() error {
		list, err := cs.CoreV1().Events(ns).List(ctx(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		for i, e := range list.Items {
			if e.InvolvedObject.Kind == trainer.TrainJobKind && e.InvolvedObject.Name == "seen" && e.Reason == "JobSetCreated" {
				created = &list.Items[i]
				return nil
			}
		}
		return fmt.Errorf("no core/v1 JobSetCreated event for TrainJob seen among %d", len(list.Items))
	})
	if got := sdkEvents([]corev1.Event{*created}, "seen"); len(got) != 1 {
		t.Errorf("Kubeflow's SDK would drop JobSetCreated: %+v", created)
	}
	want := coreView{Kind: trainer.TrainJobKind, Name: "seen", Type: corev1.EventTypeNormal, Reason: "JobSetCreated",
		Message: "Created JobSet seen", Action: "Create", Reporter: "trainyard-trainjob-controller", Count: 1,
		FirstIsEventTime: true, LastFollows: true}
	if diff := cmp.Diff(want, viewOf(created)); diff != "" {
		t.Errorf("JobSetCreated through core/v1 (-want +got):\n%s\n%+v", diff, created)
	}

	// events.k8s.io/v1 shows the same Event unchanged: its note, eventTime
	// (in microseconds) and the deprecated fields.
	var v1 eventsv1.Event
	require.NoError(t, env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: created.Name}, &v1))
	type v1View struct {
		Reason, Note                string
		EventTime, First, Last      time.Time
		DeprecatedCount             int32
		RegardingKind, RegardingObj string
	}
	wantV1 := v1View{Reason: "JobSetCreated", Note: "Created JobSet seen", EventTime: created.EventTime.Time,
		First: created.FirstTimestamp.Time, Last: created.LastTimestamp.Time, DeprecatedCount: 1,
		RegardingKind: trainer.TrainJobKind, RegardingObj: "seen"}
	gotV1 := v1View{Reason: v1.Reason, Note: v1.Note, EventTime: v1.EventTime.Time,
		First: v1.DeprecatedFirstTimestamp.Time, Last: v1.DeprecatedLastTimestamp.Time, DeprecatedCount: v1.DeprecatedCount,
		RegardingKind: v1.Regarding.Kind, RegardingObj: v1.Regarding.Name}
	if diff := cmp.Diff(wantV1, gotV1); diff != "" {
		t.Errorf("the same Event through events.k8s.io/v1 (-want +got):\n%s", diff)
	}
}

// A repeat (client-go's series) is one Event whose core/v1 count and
// lastTimestamp follow the series, as the real API server stores it.
func TestRepeatedEventCountsThroughCoreV1(t *testing.T) {
	ns := newNamespace(t)
	applyFile(t, ns, "runtimes/torch-distributed.yaml")
	require.NoError(t, env.Client.Create(ctx(), torchJob(ns, "twice", func(j *trainer.TrainJob) { j.Spec.Suspend = ptr.To(true) })))
	job := getTrainJob(t, ns, "twice")
	cs := clientset(t)

	p := eventrecorder.NewProvider(cs.CoreV1(), env.Scheme, logr.Discard())
	stop, stopped := context.WithCancel(ctx())
	done := make(chan struct{})
	go func() { _ = p.Start(stop); close(done) }()
	t.Cleanup(func() { stopped(); <-done })
	rec := p.GetEventRecorder("trainyard-test-controller")

	find := func(count int32) *corev1.Event {
		t.Helper()
		var found *corev1.Event
		eventually(t, func() error {
			list, err := cs.CoreV1().Events(ns).List(ctx(), metav1.ListOptions{})
			if err != nil {
				return err
			}
			for i, e := range list.Items {
				if e.Reason == "Restarted" && e.ReportingController == "trainyard-test-controller" {
					if e.Count != count {
						return fmt.Errorf("Restarted count %d, want %d", e.Count, count)
					}
					found = &list.Items[i]
					return nil
				}
			}
			return fmt.Errorf("no Restarted event among %d", len(list.Items))
		})
		return found
	}
	rec.Eventf(job, nil, corev1.EventTypeWarning, "Restarted", "Restart", "pods restarted (%d)", 1)
	first := find(1)
	// A second apart, so that lastTimestamp (whole seconds) moves on.
	time.Sleep(time.Until(first.EventTime.Truncate(time.Second).Add(time.Second + 50*time.Millisecond)))
	rec.Eventf(job, nil, corev1.EventTypeWarning, "Restarted", "Restart", "pods restarted (%d)", 2)
	again := find(2)

	want := coreView{Kind: trainer.TrainJobKind, Name: "twice", Type: corev1.EventTypeWarning, Reason: "Restarted",
		Message: "pods restarted (1)", Action: "Restart", Reporter: "trainyard-test-controller", Count: 2,
		FirstIsEventTime: true, LastFollows: true}
	if diff := cmp.Diff(want, viewOf(again)); diff != "" {
		t.Errorf("repeated event through core/v1 (-want +got):\n%s\n%+v", diff, again)
	}
	if again.Name != first.Name || again.Series == nil || again.Series.Count != 2 ||
		!again.FirstTimestamp.Equal(&first.FirstTimestamp) || !again.LastTimestamp.After(first.LastTimestamp.Time) {
		t.Errorf("the repeat is not the first Event with a series of 2 and a later lastTimestamp:\nfirst %+v\nagain %+v", first, again)
	}
}
