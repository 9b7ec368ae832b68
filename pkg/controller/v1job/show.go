package v1job

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainyard/trainyard/pkg/cli/view"
)

// Shown is what the CLI shows of a job: its replicas, its status (the v1
// condition it is in, with reason and message) and its steps, one per pod,
// named after the replica (launcher-0, worker-1).
type Shown struct {
	Name              string         `json:"name"`
	Namespace         string         `json:"namespace"`
	Kind              string         `json:"kind"`
	CreationTimestamp metav1.Time    `json:"creationTimestamp"`
	Replicas          []ReplicaCount `json:"replicas"`
	Status            string         `json:"status,omitempty"`
	Reason            string         `json:"reason,omitempty"`
	Message           string         `json:"message,omitempty"`
	Steps             []view.Step    `json:"steps"`
}

// ReplicaCount is the number of pods of one replica type.
type ReplicaCount struct {
	Type  string `json:"type"`
	Count int32  `json:"count"`
}

func replicasString(rs []ReplicaCount) string {
	parts := make([]string, 0, len(rs))
	for _, r := range rs {
		parts = append(parts, fmt.Sprintf("%s %d", r.Type, r.Count))
	}
	return strings.Join(parts, ", ")
}

func printJobs(w io.Writer, jobs []Shown, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tREPLICAS\tSTATUS\tREASON\tAGE")
	for _, j := range jobs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", j.Name, view.OrDash(replicasString(j.Replicas)), view.OrDash(j.Status), view.OrDash(j.Reason),
			view.Age(j.CreationTimestamp, now))
	}
	return tw.Flush()
}

func printJob(w io.Writer, j Shown, now time.Time) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Name:      %s\n", j.Name)
	fmt.Fprintf(&b, "Namespace: %s\n", j.Namespace)
	fmt.Fprintf(&b, "Kind:      %s\n", j.Kind)
	fmt.Fprintf(&b, "Replicas:  %s\n", view.OrDash(replicasString(j.Replicas)))
	fmt.Fprintf(&b, "Status:    %s\n", view.OrDash(j.Status))
	if j.Reason != "" {
		fmt.Fprintf(&b, "Reason:    %s\n", j.Reason)
	}
	if j.Message != "" {
		fmt.Fprintf(&b, "Message:   %s\n", j.Message)
	}
	fmt.Fprintf(&b, "Age:       %s\n", view.Age(j.CreationTimestamp, now))
	view.WriteSteps(&b, j.Steps)
	_, err := io.WriteString(w, b.String())
	return err
}
