package view

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// What the training code reported through the status server
// (status.trainerStatus), as `get`, `wait` and `logs -f` show it.

// ProgressText is the one-line summary: "42%, ETA 2m0s, loss=0.12 accuracy=0.9".
// Empty when nothing was reported.
func ProgressText(st *trainer.TrainerStatus) string {
	if st == nil {
		return ""
	}
	var parts []string
	if st.ProgressPercentage != nil {
		parts = append(parts, fmt.Sprintf("%d%%", *st.ProgressPercentage))
	}
	if st.EstimatedRemainingSeconds != nil {
		parts = append(parts, "ETA "+(time.Duration(*st.EstimatedRemainingSeconds)*time.Second).String())
	}
	if m := MetricsText(st.Metrics); m != "" {
		parts = append(parts, m)
	}
	return strings.Join(parts, ", ")
}

// MetricsText is a trainer's metrics as name=value pairs.
func MetricsText(ms []trainer.Metric) string {
	var kv []string
	for _, m := range ms {
		kv = append(kv, m.Name+"="+m.Value)
	}
	return strings.Join(kv, " ")
}

const barWidth = 30

// ProgressBar draws "[##########--------------------]  33%  ETA 1m0s  loss=0.4".
func ProgressBar(st *trainer.TrainerStatus) string {
	if st == nil {
		return ""
	}
	pct := int32(0)
	if st.ProgressPercentage != nil {
		pct = min(max(*st.ProgressPercentage, 0), 100)
	}
	filled := int(pct) * barWidth / 100
	s := fmt.Sprintf("[%s%s] %3d%%", strings.Repeat("#", filled), strings.Repeat("-", barWidth-filled), pct)
	if st.EstimatedRemainingSeconds != nil {
		s += "  ETA " + (time.Duration(*st.EstimatedRemainingSeconds) * time.Second).String()
	}
	if m := MetricsText(st.Metrics); m != "" {
		s += "  " + m
	}
	return s
}

// ProgressPrinter shows a TrainJob's reported progress as it changes. On a
// terminal in place (inPlace: the bar is redrawn on its line, and other lines
// are printed above it), else as plain lines, one per change.
type ProgressPrinter struct {
	out     io.Writer
	bar     bool // draw a bar (a terminal), else plain text
	inPlace bool // redraw the bar on one line (wait), else a line per change (logs -f, which scrolls)
	last    string
	open    bool // a bar is drawn and its line not ended
}

// NewProgressPrinter prints progress to out: a bar on a terminal, redrawn
// on one line when inPlace; else a line per change.
func NewProgressPrinter(out io.Writer, inPlace bool) *ProgressPrinter {
	tty := isTerminal(out)
	return &ProgressPrinter{out: out, bar: tty, inPlace: inPlace && tty}
}

// Update shows st if it changed since the last call.
func (p *ProgressPrinter) Update(prefix string, st *trainer.TrainerStatus) {
	text := ProgressText(st)
	if text == "" || text == p.last {
		return
	}
	p.last = text
	switch {
	case p.inPlace:
		fmt.Fprintf(p.out, "\r\033[K%s%s", prefix, ProgressBar(st))
		p.open = true
	case p.bar:
		fmt.Fprintf(p.out, "%s%s\n", prefix, ProgressBar(st))
	default:
		fmt.Fprintf(p.out, "%sprogress %s\n", prefix, text)
	}
}

// Line prints a whole line, above the bar.
func (p *ProgressPrinter) Line(format string, args ...any) {
	p.End()
	fmt.Fprintf(p.out, format, args...)
}

// End finishes the bar's line.
func (p *ProgressPrinter) End() {
	if p.open {
		fmt.Fprintln(p.out)
		p.open = false
	}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// FollowProgress prints a job's reported progress (read by progress)
// whenever it changes, until finished is closed (for `logs -f`; on stderr,
// so that stdout stays the logs).
func FollowProgress(ctx context.Context, progress func(context.Context) *trainer.TrainerStatus, finished <-chan struct{}, pp *ProgressPrinter) {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	show := func() {
		if st := progress(ctx); st != nil {
			pp.Update("[progress] ", st)
		}
	}
	for {
		show()
		select {
		case <-ctx.Done():
			return
		case <-finished:
			show() // the last report, written just before the end
			return
		case <-t.C:
		}
	}
}
