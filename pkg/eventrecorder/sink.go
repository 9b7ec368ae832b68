// Package eventrecorder gives the manager's controllers their event recorders,
// so that every Event Trainyard records reads the same through both event APIs.
//
// controller-runtime's recorders (mgr.GetEventRecorder) write events.k8s.io/v1
// Events that carry only eventTime (and series on a repeat): seen through
// core/v1 they have no firstTimestamp, lastTimestamp or count. Kubeflow's
// Python SDK reads core/v1: TrainerClient.get_job_events (kubeflow/sdk,
// kubeflow/trainer/backends/kubernetes/backend.py) lists the namespace's
// Events with CoreV1Api.list_namespaced_event, skips every Event without
// metadata, involved_object or first_timestamp, keeps those about the
// TrainJob, its JobSet, Jobs and pods (by involved_object kind and name), and
// reports and sorts them by first_timestamp. It dropped every Trainyard event.
//
// The recorders here keep client-go's events.k8s.io/v1 recorder (eventTime,
// action, reportingController, the aggregation of repeats into a series) and
// write its Events through core/v1 with the deprecated fields filled from
// eventTime and the series. They cannot go through events.k8s.io/v1: it
// refuses deprecatedFirstTimestamp, deprecatedLastTimestamp and
// deprecatedCount on create ("needs to be unset") and keeps them immutable on
// update (k8s.io/kubernetes pkg/apis/core/validation/events.go); core/v1
// accepts them with eventTime and series. Both APIs serve the same object, so
// events.k8s.io/v1 readers see it unchanged, plus the deprecated fields.
package eventrecorder

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/events"
)

// Core/v1 Events in every namespace: the job's. client-go's broadcaster only
// creates and patches (a repeat's series); it never updates.
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Sink is the events.EventSink of the manager's recorders: it writes each
// events.k8s.io/v1 Event through core/v1, with the fields core/v1 readers need
// (withCoreFields).
//
// Errors are returned as the client returned them, unwrapped: client-go's
// broadcaster decides whether to retry, and whether a patched series must be
// created instead, from their concrete types (*errors.StatusError,
// *rest.RequestConstructionError), which it does not unwrap.
type Sink struct {
	Client typedcorev1.EventsGetter
}

var _ events.EventSink = (*Sink)(nil)

var errNoNamespace = errors.New("an Event needs a namespace")

// Create creates the Event.
func (s *Sink) Create(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	if ev.Namespace == "" {
		return nil, errNoNamespace
	}
	out, err := s.Client.Events(ev.Namespace).Create(ctx, toCore(withCoreFields(ev)), metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	return fromCore(out), nil
}

// Update replaces the Event.
func (s *Sink) Update(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	if ev.Namespace == "" {
		return nil, errNoNamespace
	}
	out, err := s.Client.Events(ev.Namespace).Update(ctx, toCore(withCoreFields(ev)), metav1.UpdateOptions{})
	if err != nil {
		return nil, err
	}
	return fromCore(out), nil
}

// Patch records a repeat: client-go calls it with the Event as it is now (its
// series counted up) and a patch of the events.k8s.io/v1 series only. That
// patch is not used: the one sent is computed the same way (the Event without
// its series to the Event), in core/v1, so that it also carries the count and
// lastTimestamp that follow the series.
func (s *Sink) Patch(ctx context.Context, ev *eventsv1.Event, _ []byte) (*eventsv1.Event, error) {
	if ev.Namespace == "" {
		return nil, errNoNamespace
	}
	data, err := seriesPatch(ev)
	if err != nil {
		return nil, err
	}
	out, err := s.Client.Events(ev.Namespace).Patch(ctx, ev.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{})
	if err != nil {
		return nil, err
	}
	return fromCore(out), nil
}

// seriesPatch is the core/v1 strategic merge patch from the Event as first
// written (no series) to the Event with its series.
func seriesPatch(ev *eventsv1.Event) ([]byte, error) {
	first := ev.DeepCopy()
	first.Series = nil
	oldData, err := json.Marshal(toCore(withCoreFields(first)))
	if err != nil {
		return nil, fmt.Errorf("encoding event %s/%s: %w", ev.Namespace, ev.Name, err)
	}
	newData, err := json.Marshal(toCore(withCoreFields(ev)))
	if err != nil {
		return nil, fmt.Errorf("encoding event %s/%s: %w", ev.Namespace, ev.Name, err)
	}
	data, err := strategicpatch.CreateTwoWayMergePatch(oldData, newData, corev1.Event{})
	if err != nil {
		return nil, fmt.Errorf("patch of event %s/%s: %w", ev.Namespace, ev.Name, err)
	}
	return data, nil
}

// withCoreFields returns a copy of ev with the fields core/v1 readers go by:
// firstTimestamp is when it first happened (eventTime), lastTimestamp and
// count follow the series on a repeat (its lastObservedTime and count), else
// they are eventTime and 1. The timestamps are in whole seconds, as the API
// server stores them (eventTime keeps its microseconds). client-go's recorder
// always sets eventTime; an Event without one is left as it is.
func withCoreFields(ev *eventsv1.Event) *eventsv1.Event {
	out := ev.DeepCopy()
	if ev.EventTime.IsZero() {
		return out
	}
	out.DeprecatedFirstTimestamp = seconds(ev.EventTime.Time)
	out.DeprecatedLastTimestamp = seconds(ev.EventTime.Time)
	out.DeprecatedCount = 1
	if s := ev.Series; s != nil {
		out.DeprecatedLastTimestamp = seconds(s.LastObservedTime.Time)
		out.DeprecatedCount = s.Count
	}
	return out
}

func seconds(t time.Time) metav1.Time { return metav1.NewTime(t.Truncate(time.Second)) }

// toCore is the API server's events.k8s.io/v1 → core/v1 field mapping.
func toCore(ev *eventsv1.Event) *corev1.Event {
	out := &corev1.Event{
		ObjectMeta:          *ev.ObjectMeta.DeepCopy(),
		InvolvedObject:      ev.Regarding,
		Reason:              ev.Reason,
		Message:             ev.Note,
		Source:              ev.DeprecatedSource,
		FirstTimestamp:      ev.DeprecatedFirstTimestamp,
		LastTimestamp:       ev.DeprecatedLastTimestamp,
		Count:               ev.DeprecatedCount,
		Type:                ev.Type,
		EventTime:           ev.EventTime,
		Action:              ev.Action,
		ReportingController: ev.ReportingController,
		ReportingInstance:   ev.ReportingInstance,
	}
	if ev.Related != nil {
		r := *ev.Related
		out.Related = &r
	}
	if ev.Series != nil {
		out.Series = &corev1.EventSeries{Count: ev.Series.Count, LastObservedTime: ev.Series.LastObservedTime}
	}
	return out
}

// fromCore is the API server's core/v1 → events.k8s.io/v1 field mapping.
func fromCore(ev *corev1.Event) *eventsv1.Event {
	out := &eventsv1.Event{
		ObjectMeta:               *ev.ObjectMeta.DeepCopy(),
		EventTime:                ev.EventTime,
		ReportingController:      ev.ReportingController,
		ReportingInstance:        ev.ReportingInstance,
		Action:                   ev.Action,
		Reason:                   ev.Reason,
		Regarding:                ev.InvolvedObject,
		Note:                     ev.Message,
		Type:                     ev.Type,
		DeprecatedSource:         ev.Source,
		DeprecatedFirstTimestamp: ev.FirstTimestamp,
		DeprecatedLastTimestamp:  ev.LastTimestamp,
		DeprecatedCount:          ev.Count,
	}
	if ev.Related != nil {
		r := *ev.Related
		out.Related = &r
	}
	if ev.Series != nil {
		out.Series = &eventsv1.EventSeries{Count: ev.Series.Count, LastObservedTime: ev.Series.LastObservedTime}
	}
	return out
}
