package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainyard/trainyard/pkg/cli/logs"
)

// JobSetKind is the kind of a job's JobSet (named as the job).
const JobSetKind = "JobSet"

// Event is what the CLI shows of an Event about a job, its JobSet or its pods.
type Event struct {
	LastSeen metav1.Time `json:"lastSeen"`
	Type     string      `json:"type"`
	Reason   string      `json:"reason"`
	// Kind and Object name what the event is about (events.k8s.io regarding,
	// core/v1 involvedObject).
	Kind    string `json:"kind"`
	Object  string `json:"object"`
	Message string `json:"message"`
	// Count is how often it happened (1 for a single event); FirstSeen when it first did.
	Count     int32       `json:"count"`
	FirstSeen metav1.Time `json:"firstSeen"`
	// Reporter is the controller that wrote it.
	Reporter string `json:"reporter,omitempty"`

	key string // namespace/name of the Event object, to drop the second view of it
}

// eventTarget says whether an event about kind/name belongs to the job.
type eventTarget struct {
	kind, job string
	pods      map[string]bool
}

func (t eventTarget) matches(kind, name string) bool {
	switch kind {
	case t.kind, JobSetKind:
		return name == t.job
	case "Pod":
		return t.pods[name]
	}
	return false
}

// firstTime is the first non-zero time, else the zero time.
func firstTime(ts ...metav1.Time) metav1.Time {
	for _, t := range ts {
		if !t.IsZero() {
			return t
		}
	}
	return metav1.Time{}
}

// NewEventFromV1 describes an events.k8s.io/v1 Event, as the manager writes them.
func NewEventFromV1(ev *eventsv1.Event) Event {
	e := Event{Type: ev.Type, Reason: ev.Reason, Kind: ev.Regarding.Kind, Object: ev.Regarding.Name, Message: ev.Note,
		Count: 1, Reporter: ev.ReportingController, key: ev.Namespace + "/" + ev.Name}
	eventTime := metav1.Time{Time: ev.EventTime.Time}
	e.FirstSeen = firstTime(eventTime, ev.DeprecatedFirstTimestamp, ev.CreationTimestamp)
	e.LastSeen = firstTime(eventTime, ev.DeprecatedLastTimestamp, ev.CreationTimestamp)
	if ev.Series != nil {
		e.Count = ev.Series.Count
		e.LastSeen = firstTime(metav1.Time{Time: ev.Series.LastObservedTime.Time}, e.LastSeen)
	} else if ev.DeprecatedCount > 1 {
		e.Count = ev.DeprecatedCount
	}
	if e.Reporter == "" {
		e.Reporter = ev.DeprecatedSource.Component
	}
	return e
}

// NewEventFromCore describes a core/v1 Event, as older recorders write them.
func NewEventFromCore(ev *corev1.Event) Event {
	e := Event{Type: ev.Type, Reason: ev.Reason, Kind: ev.InvolvedObject.Kind, Object: ev.InvolvedObject.Name, Message: ev.Message,
		Count: 1, Reporter: ev.ReportingController, key: ev.Namespace + "/" + ev.Name}
	eventTime := metav1.Time{Time: ev.EventTime.Time}
	e.FirstSeen = firstTime(ev.FirstTimestamp, eventTime, ev.CreationTimestamp)
	e.LastSeen = firstTime(ev.LastTimestamp, eventTime, ev.CreationTimestamp)
	if ev.Series != nil {
		e.Count = ev.Series.Count
		e.LastSeen = firstTime(metav1.Time{Time: ev.Series.LastObservedTime.Time}, e.LastSeen)
	} else if ev.Count > 1 {
		e.Count = ev.Count
	}
	if e.Reporter == "" {
		e.Reporter = ev.Source.Component
	}
	return e
}

// ListEvents reads the events of a job (job, an empty object of its kind,
// named kind), of its JobSet and of its pods (the pods labelled
// jobset.sigs.k8s.io/jobset-name=NAME), oldest first: the events.k8s.io/v1
// Events and the core/v1 Events of the namespace, filtered here by the object
// they are about (no field selectors), an Event seen through both APIs once.
func ListEvents(ctx context.Context, c client.Client, job client.Object, kind, namespace, name string) ([]Event, error) {
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, job); err != nil {
		return nil, fmt.Errorf("reading %s %s/%s: %w", kind, namespace, name, err)
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{logs.JobSetNameLabel: name}); err != nil {
		return nil, fmt.Errorf("listing the pods of %s %s/%s: %w", kind, namespace, name, err)
	}
	target := eventTarget{kind: kind, job: name, pods: map[string]bool{}}
	for _, p := range pods.Items {
		target.pods[p.Name] = true
	}
	var out []Event
	seen := map[string]bool{}
	add := func(e Event) {
		if !target.matches(e.Kind, e.Object) || seen[e.key] {
			return
		}
		seen[e.key] = true
		out = append(out, e)
	}
	var v1 eventsv1.EventList
	if err := c.List(ctx, &v1, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing events.k8s.io Events in namespace %s: %w", namespace, err)
	}
	for i := range v1.Items {
		add(NewEventFromV1(&v1.Items[i]))
	}
	var core corev1.EventList
	if err := c.List(ctx, &core, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing Events in namespace %s: %w", namespace, err)
	}
	for i := range core.Items {
		add(NewEventFromCore(&core.Items[i]))
	}
	SortEvents(out)
	return out, nil
}

// SortEvents orders events by when they were last seen, then first seen, then
// by object and reason (so that the order is stable).
func SortEvents(evs []Event) {
	sort.SliceStable(evs, func(i, j int) bool {
		a, b := evs[i], evs[j]
		if !a.LastSeen.Equal(&b.LastSeen) {
			return a.LastSeen.Before(&b.LastSeen)
		}
		if !a.FirstSeen.Equal(&b.FirstSeen) {
			return a.FirstSeen.Before(&b.FirstSeen)
		}
		return false
	})
}

// PrintEvents writes events as `kubectl events` does: LAST SEEN (with the count
// and the span of a repeated event), TYPE, REASON, OBJECT (kind/name), MESSAGE.
func PrintEvents(w io.Writer, evs []Event, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LAST SEEN\tTYPE\tREASON\tOBJECT\tMESSAGE")
	for _, e := range evs {
		seen := since(e.LastSeen, now)
		if e.Count > 1 {
			seen += fmt.Sprintf(" (x%d over %s)", e.Count, since(e.FirstSeen, now))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s/%s\t%s\n", seen, e.Type, e.Reason, strings.ToLower(e.Kind), e.Object,
			strings.TrimSpace(strings.ReplaceAll(e.Message, "\n", " ")))
	}
	return tw.Flush()
}

func since(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}
