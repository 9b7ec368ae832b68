package eventrecorder

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

var (
	t0 = time.Date(2025, 3, 1, 10, 0, 0, 123456000, time.UTC)
	t1 = t0.Add(90 * time.Second)
)

// event is an Event as client-go's recorder makes it: eventTime, no
// deprecated fields.
func event(mutate ...func(*eventsv1.Event)) *eventsv1.Event {
	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Namespace: "ns", Name: "job.1826a"},
		EventTime:           metav1.NewMicroTime(t0),
		ReportingController: "trainyard-trainjob-controller",
		ReportingInstance:   "trainyard-trainjob-controller-host",
		Action:              "Create",
		Reason:              "JobSetCreated",
		Regarding:           corev1.ObjectReference{Kind: "TrainJob", Namespace: "ns", Name: "job", UID: "uid-1", APIVersion: "trainer.kubeflow.org/v1alpha1"},
		Note:                "Created JobSet job",
		Type:                corev1.EventTypeNormal,
	}
	for _, m := range mutate {
		m(ev)
	}
	return ev
}

func series(count int32, last time.Time) func(*eventsv1.Event) {
	return func(ev *eventsv1.Event) {
		ev.Series = &eventsv1.EventSeries{Count: count, LastObservedTime: metav1.NewMicroTime(last)}
	}
}

func deprecated(first, last time.Time, count int32) func(*eventsv1.Event) {
	return func(ev *eventsv1.Event) {
		ev.DeprecatedFirstTimestamp = metav1.NewTime(first.Truncate(time.Second))
		ev.DeprecatedLastTimestamp = metav1.NewTime(last.Truncate(time.Second))
		ev.DeprecatedCount = count
	}
}

func TestWithCoreFields(t *testing.T) {
	cases := map[string]struct {
		in, want *eventsv1.Event
	}{
		"single event: first and last are eventTime, count 1": {
			in:   event(),
			want: event(deprecated(t0, t0, 1)),
		},
		"repeat: last and count follow the series": {
			in:   event(series(3, t1)),
			want: event(series(3, t1), deprecated(t0, t1, 3)),
		},
		"stale deprecated fields are derived again": {
			in:   event(series(2, t1), deprecated(t0, t0, 1)),
			want: event(series(2, t1), deprecated(t0, t1, 2)),
		},
		"no eventTime: left as it is": {
			in:   event(func(ev *eventsv1.Event) { ev.EventTime = metav1.MicroTime{} }),
			want: event(func(ev *eventsv1.Event) { ev.EventTime = metav1.MicroTime{} }),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := tc.in.DeepCopy()
			got := withCoreFields(tc.in)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("withCoreFields (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(in, tc.in); diff != "" {
				t.Errorf("withCoreFields changed its argument (-before +after):\n%s", diff)
			}
		})
	}
}

// TestConversionRoundTrip: what the sink returns (fromCore of what it wrote)
// is what it was given, so client-go's series cache keeps its Event.
func TestConversionRoundTrip(t *testing.T) {
	full := event(series(4, t1), deprecated(t0, t1, 4), func(ev *eventsv1.Event) {
		ev.Related = &corev1.ObjectReference{Kind: "JobSet", Namespace: "ns", Name: "job"}
		ev.DeprecatedSource = corev1.EventSource{Component: "c", Host: "h"}
		ev.Labels = map[string]string{"a": "b"}
	})
	if diff := cmp.Diff(full, fromCore(toCore(full))); diff != "" {
		t.Errorf("fromCore(toCore(e)) (-want +got):\n%s", diff)
	}
}

// coreEvent is how the API server shows an Event written by the sink
// through core/v1.
func coreEvent(first, last time.Time, count int32, s *corev1.EventSeries) *corev1.Event {
	return &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Namespace: "ns", Name: "job.1826a"},
		InvolvedObject:      corev1.ObjectReference{Kind: "TrainJob", Namespace: "ns", Name: "job", UID: "uid-1", APIVersion: "trainer.kubeflow.org/v1alpha1"},
		Reason:              "JobSetCreated",
		Message:             "Created JobSet job",
		FirstTimestamp:      metav1.NewTime(first.Truncate(time.Second)),
		LastTimestamp:       metav1.NewTime(last.Truncate(time.Second)),
		Count:               count,
		Type:                corev1.EventTypeNormal,
		EventTime:           metav1.NewMicroTime(t0),
		Series:              s,
		Action:              "Create",
		ReportingController: "trainyard-trainjob-controller",
		ReportingInstance:   "trainyard-trainjob-controller-host",
	}
}

func TestSink(t *testing.T) {
	type call func(ctx context.Context, s *Sink) (*eventsv1.Event, error)
	create := func(ev *eventsv1.Event) call {
		return func(ctx context.Context, s *Sink) (*eventsv1.Event, error) { return s.Create(ctx, ev) }
	}
	update := func(ev *eventsv1.Event) call {
		return func(ctx context.Context, s *Sink) (*eventsv1.Event, error) { return s.Update(ctx, ev) }
	}
	// patch passes client-go's own patch, of the series only, which the sink
	// must not need.
	patch := func(ev *eventsv1.Event) call {
		return func(ctx context.Context, s *Sink) (*eventsv1.Event, error) {
			return s.Patch(ctx, ev, []byte(`{"series":{"count":2}}`))
		}
	}
	cases := map[string]struct {
		existing []runtime.Object
		call     call
		// want is the stored core/v1 Event, nil when there should be none.
		want *corev1.Event
		// wantErr checks the error (nil: no error).
		wantErr func(error) bool
	}{
		"create a single event": {
			call: create(event()),
			want: coreEvent(t0, t0, 1, nil),
		},
		"patch a repeat: count and lastTimestamp follow the series": {
			existing: []runtime.Object{coreEvent(t0, t0, 1, nil)},
			call:     patch(event(series(2, t1))),
			want:     coreEvent(t0, t1, 2, &corev1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(t1)}),
		},
		"patch a later repeat": {
			existing: []runtime.Object{coreEvent(t0, t1, 2, &corev1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(t1)})},
			call:     patch(event(series(5, t1.Add(time.Minute)))),
			want:     coreEvent(t0, t1.Add(time.Minute), 5, &corev1.EventSeries{Count: 5, LastObservedTime: metav1.NewMicroTime(t1.Add(time.Minute))}),
		},
		"update": {
			existing: []runtime.Object{coreEvent(t0, t0, 1, nil)},
			call:     update(event(series(3, t1))),
			want:     coreEvent(t0, t1, 3, &corev1.EventSeries{Count: 3, LastObservedTime: metav1.NewMicroTime(t1)}),
		},
		// client-go creates the series when the patch finds no Event; it
		// tells from the error's concrete type, so the sink must not wrap it.
		"patch of a missing event: NotFound as a *StatusError": {
			call: patch(event(series(2, t1))),
			wantErr: func(err error) bool {
				_, ok := err.(*apierrors.StatusError) //nolint:errorlint // the type client-go switches on
				return ok && apierrors.IsNotFound(err)
			},
		},
		"create of an existing event: AlreadyExists as a *StatusError": {
			existing: []runtime.Object{coreEvent(t0, t0, 1, nil)},
			call:     create(event()),
			want:     coreEvent(t0, t0, 1, nil),
			wantErr: func(err error) bool {
				_, ok := err.(*apierrors.StatusError) //nolint:errorlint // the type client-go switches on
				return ok && apierrors.IsAlreadyExists(err)
			},
		},
		"no namespace": {
			call:    create(event(func(ev *eventsv1.Event) { ev.Namespace = "" })),
			wantErr: func(err error) bool { return errors.Is(err, errNoNamespace) },
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cs := fake.NewClientset(tc.existing...)
			got, err := tc.call(context.Background(), &Sink{Client: cs.CoreV1()})
			if tc.wantErr != nil {
				if err == nil || !tc.wantErr(err) {
					t.Fatalf("error %v (%T), not the one expected", err, err)
				}
			} else if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			stored, getErr := cs.CoreV1().Events("ns").Get(context.Background(), "job.1826a", metav1.GetOptions{})
			if tc.want == nil {
				if !apierrors.IsNotFound(getErr) {
					t.Fatalf("stored event %+v (%v), want none", stored, getErr)
				}
				return
			}
			if getErr != nil {
				t.Fatal(getErr)
			}
			// What the fake tracker adds, which the API server would too.
			stored.TypeMeta, stored.ResourceVersion, stored.ManagedFields = metav1.TypeMeta{}, "", nil
			if diff := cmp.Diff(tc.want, stored); diff != "" {
				t.Errorf("stored core/v1 Event (-want +got):\n%s", diff)
			}
			if err != nil {
				return
			}
			// What the sink returns is the stored Event, as events.k8s.io/v1 shows it.
			got.ResourceVersion, got.ManagedFields = "", nil
			if diff := cmp.Diff(fromCore(tc.want), got); diff != "" {
				t.Errorf("returned Event (-want +got):\n%s", diff)
			}
		})
	}
}

// TestProvider records through client-go's broadcaster: a repeat becomes a
// series whose count and lastTimestamp core/v1 shows, and after the manager
// stops nothing more is written.
func TestProvider(t *testing.T) {
	cs := fake.NewClientset()
	p := NewProvider(cs.CoreV1(), clientgoscheme.Scheme, logr.Discard())
	ctx, stop := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- p.Start(ctx) }()

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: types.UID("uid-p")}}
	rec := p.GetEventRecorder("trainyard-test-controller")
	rec.Eventf(pod, nil, corev1.EventTypeWarning, "Restarted", "Restart", "restart %d", 1)
	only := waitEvents(t, cs, func(evs []corev1.Event) bool { return len(evs) == 1 && evs[0].Count == 1 })[0]
	rec.Eventf(pod, nil, corev1.EventTypeWarning, "Restarted", "Restart", "restart %d", 2)
	got := waitEvents(t, cs, func(evs []corev1.Event) bool { return len(evs) == 1 && evs[0].Count == 2 })[0]

	type view struct {
		Kind, Name, Type, Reason, Action, Message, Controller string
		Count, SeriesCount                                    int32
		FirstIsEventTime, LastIsSeriesTime                    bool
	}
	want := view{Kind: "Pod", Name: "p", Type: corev1.EventTypeWarning, Reason: "Restarted", Action: "Restart",
		Message: "restart 1", Controller: "trainyard-test-controller", Count: 2, SeriesCount: 2,
		FirstIsEventTime: true, LastIsSeriesTime: true}
	v := view{Kind: got.InvolvedObject.Kind, Name: got.InvolvedObject.Name, Type: got.Type, Reason: got.Reason,
		Action: got.Action, Message: got.Message, Controller: got.ReportingController, Count: got.Count,
		FirstIsEventTime: !got.FirstTimestamp.IsZero() && got.FirstTimestamp.Time.Equal(got.EventTime.Truncate(time.Second)) &&
			got.FirstTimestamp.Equal(&only.FirstTimestamp)}
	if got.Series != nil {
		v.SeriesCount = got.Series.Count
		v.LastIsSeriesTime = got.LastTimestamp.Time.Equal(got.Series.LastObservedTime.Truncate(time.Second))
	}
	if diff := cmp.Diff(want, v); diff != "" {
		t.Errorf("the repeated event through core/v1 (-want +got):\n%s", diff)
	}

	stop()
	if err := <-stopped; err != nil {
		t.Fatalf("Start: %v", err)
	}
	rec.Eventf(pod, nil, corev1.EventTypeNormal, "Late", "Late", "after the manager stopped")
	p.GetEventRecorder("other").Eventf(pod, nil, corev1.EventTypeNormal, "Late", "Late", "after the manager stopped")
	time.Sleep(200 * time.Millisecond)
	if evs, _ := cs.CoreV1().Events("ns").List(context.Background(), metav1.ListOptions{}); len(evs.Items) != 1 {
		t.Errorf("%d events after the manager stopped, want the 1 from before", len(evs.Items))
	}
}

func waitEvents(t *testing.T, cs *fake.Clientset, done func([]corev1.Event) bool) []corev1.Event {
	t.Helper()
	var last []corev1.Event
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		evs, err := cs.CoreV1().Events("ns").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if last = evs.Items; done(last) {
			return last
		}
	}
	t.Fatalf("events never as expected; last seen: %+v", last)
	return nil
}
