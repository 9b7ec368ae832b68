package view

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
)

// WriteSteps writes a job's steps, one per line as the SDK prints them, with
// the GPUs a process node gave it and the message of a failed one.
func WriteSteps(b *strings.Builder, steps []Step) {
	if len(steps) == 0 {
		b.WriteString("Steps:     none yet\n")
	} else {
		b.WriteString("Steps:\n")
	}
	for _, s := range steps {
		fmt.Fprintf(b, "  %s, Pod: %s\n", s, s.Pod)
		if len(s.GPUs) > 0 {
			fmt.Fprintf(b, "    GPUs: %s\n", strings.Join(s.GPUs, ","))
		}
		if s.Message != "" {
			fmt.Fprintf(b, "    Message: %s\n", strings.ReplaceAll(s.Message, "\n", "\n             "))
		}
	}
}

// Age is kubectl's AGE of an object created at t ("-" when unknown).
func Age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// OrDash is s, or "-" when it is empty.
func OrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// ReasonText is " (reason: message)", " (reason)" or "".
func ReasonText(reason, message string) string {
	switch {
	case reason != "" && message != "":
		return " (" + reason + ": " + message + ")"
	case reason != "":
		return " (" + reason + ")"
	}
	return ""
}
