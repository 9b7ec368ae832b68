package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// Output formats of -o.
const (
	OutputTable = ""
	OutputYAML  = "yaml"
	OutputJSON  = "json"
)

func checkOutput(o string) error {
	switch o {
	case OutputTable, OutputYAML, OutputJSON:
		return nil
	}
	return usageError{fmt.Errorf("-o %q: want yaml or json (default: a table)", o)}
}

// printData writes v as YAML or JSON.
func printData(w io.Writer, format string, v interface{}) error {
	switch format {
	case OutputJSON:
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return fmt.Errorf("encoding JSON: %w", err)
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case OutputYAML:
		b, err := yaml.Marshal(v)
		if err != nil {
			return fmt.Errorf("encoding YAML: %w", err)
		}
		_, err = w.Write(b)
		return err
	}
	return fmt.Errorf("unknown output format %q", format)
}

// PrintRuntimes writes the runtimes as a table.
func PrintRuntimes(w io.Writer, rts []Runtime) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tFRAMEWORK\tNODES\tDEVICE\tDEVICE COUNT\tENTRYPOINT")
	for _, r := range rts {
		name := r.Name
		if r.Namespace != "" {
			name = r.Namespace + "/" + r.Name
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", name, r.Kind, r.Framework, r.NumNodes, r.Device, r.DeviceCount, r.Entrypoint)
	}
	return tw.Flush()
}

// PrintJobs writes TrainJobs as a table.
func PrintJobs(w io.Writer, jobs []Job, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tRUNTIME\tNODES\tSTATUS\tREASON\tAGE")
	for _, j := range jobs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", j.Name, j.Runtime, j.NumNodes, j.Status, orDash(j.Reason), age(j, now))
	}
	return tw.Flush()
}

// PrintJob writes one TrainJob with its steps, a step per line as the SDK prints them.
func PrintJob(w io.Writer, j Job, now time.Time) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Name:      %s\n", j.Name)
	fmt.Fprintf(&b, "Namespace: %s\n", j.Namespace)
	fmt.Fprintf(&b, "Runtime:   %s\n", j.Runtime)
	fmt.Fprintf(&b, "Nodes:     %d\n", j.NumNodes)
	fmt.Fprintf(&b, "Status:    %s\n", j.Status)
	if j.Reason != "" {
		fmt.Fprintf(&b, "Reason:    %s\n", j.Reason)
	}
	if j.Message != "" {
		fmt.Fprintf(&b, "Message:   %s\n", j.Message)
	}
	if st := j.TrainerStatus; st != nil {
		if st.ProgressPercentage != nil || st.EstimatedRemainingSeconds != nil {
			fmt.Fprintf(&b, "Progress:  %s\n", progressText(&trainer.TrainerStatus{
				ProgressPercentage: st.ProgressPercentage, EstimatedRemainingSeconds: st.EstimatedRemainingSeconds}))
		}
		if len(st.Metrics) > 0 {
			fmt.Fprintf(&b, "Metrics:   %s\n", metricsText(st.Metrics))
		}
		if !st.LastUpdatedTime.IsZero() {
			fmt.Fprintf(&b, "Reported:  %s ago\n", duration.HumanDuration(now.Sub(st.LastUpdatedTime.Time)))
		}
	}
	fmt.Fprintf(&b, "Age:       %s\n", age(j, now))
	writeSteps(&b, j.Steps)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeSteps writes a job's steps, one per line as the SDK prints them, with
// the GPUs a process node gave it and the message of a failed one.
func writeSteps(b *strings.Builder, steps []Step) {
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

func age(j Job, now time.Time) string { return ageOf(j.CreationTimestamp, now) }

// ageOf is kubectl's AGE of an object created at t ("-" when unknown).
func ageOf(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
