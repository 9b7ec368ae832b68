// Command benchplot draws make bench's pictures from bin/perf/samples.json: a
// latency CDF per phase (each job's create → its JobSet seen) and JobSets seen
// over time per phase (throughput). It is a tool module of its own so that
// the plotting library stays out of Trainyard's go.mod.
//
// Usage: benchplot -samples bin/perf/samples.json -out docs/perf (the titles
// name the run from result.json beside samples.json).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// samples is one phase's per-job numbers, each sorted ascending (the bench's
// Samples type).
type samples struct {
	LatencyMillis     []float64 `json:"latencyMillis"`
	JobSetSeenSeconds []float64 `json:"jobSetSeenSeconds"`
}

// phaseOrder is the order the bench runs its phases in; legends follow it.
var phaseOrder = []string{"raw", "pair", "trainyard", "paced", "kueue-jobset", "kueue"}

func main() {
	in := flag.String("samples", "bin/perf/samples.json", "the bench's samples.json")
	out := flag.String("out", "docs/perf", "directory for latency-cdf.svg and jobsets-over-time.svg")
	flag.Parse()
	if err := run(*in, *out); err != nil {
		fmt.Fprintln(os.Stderr, "benchplot:", err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	b, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	var res struct {
		Label     string `json:"label"`
		N         int    `json:"n"`
		Suspended bool   `json:"suspended"`
	}
	if rb, err := os.ReadFile(filepath.Join(filepath.Dir(in), "result.json")); err == nil {
		_ = json.Unmarshal(rb, &res)
	}
	var phases map[string]*samples
	if err := json.Unmarshal(b, &phases); err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	names := ordered(phases)
	if len(names) == 0 {
		return fmt.Errorf("%s: no phase with samples", in)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	suffix := fmt.Sprintf(" (%d jobs", res.N)
	if res.Suspended {
		suffix += ", suspended"
	}
	if res.Label != "" {
		suffix += ", run " + res.Label
	}
	suffix += ")"

	cdf := plot.New()
	cdf.Title.Text = "TrainJob → JobSet latency, CDF per phase" + suffix
	cdf.X.Label.Text = "create request → JobSet seen (ms, log scale)"
	cdf.Y.Label.Text = "fraction of jobs"
	cdf.X.Scale = plot.LogScale{}
	cdf.X.Tick.Marker = plot.LogTicks{Prec: -1}
	cdf.Legend.Top, cdf.Legend.Left = true, true
	cdf.Y.Min, cdf.Y.Max = 0, 1

	over := plot.New()
	over.Title.Text = "JobSets seen over time per phase" + suffix
	over.X.Label.Text = "seconds since the phase's first create"
	over.Y.Label.Text = "JobSets seen"
	over.Legend.Top, over.Legend.Left = true, true

	for i, name := range names {
		s := phases[name]
		if err := addLine(cdf, name, i, cdfPoints(s.LatencyMillis)); err != nil {
			return err
		}
		if err := addLine(over, name, i, cumulative(s.JobSetSeenSeconds)); err != nil {
			return err
		}
	}
	for file, p := range map[string]*plot.Plot{"latency-cdf.svg": cdf, "jobsets-over-time.svg": over} {
		path := filepath.Join(out, file)
		if err := p.Save(7*vg.Inch, 4*vg.Inch, path); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
		fmt.Fprintln(os.Stderr, "benchplot: wrote", path)
	}
	return nil
}

// ordered lists the phases with samples, in the bench's order, then any other.
func ordered(phases map[string]*samples) []string {
	var names []string
	seen := map[string]bool{}
	for _, n := range phaseOrder {
		if s := phases[n]; s != nil && len(s.LatencyMillis) > 0 {
			names = append(names, n)
			seen[n] = true
		}
	}
	var rest []string
	for n, s := range phases {
		if !seen[n] && s != nil && len(s.LatencyMillis) > 0 {
			rest = append(rest, n)
		}
	}
	sort.Strings(rest)
	return append(names, rest...)
}

func addLine(p *plot.Plot, name string, i int, xys plotter.XYs) error {
	l, err := plotter.NewLine(xys)
	if err != nil {
		return fmt.Errorf("phase %s: %w", name, err)
	}
	l.Color = plotutil.Color(i)
	l.Dashes = plotutil.Dashes(i)
	l.Width = vg.Points(1.5)
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}

// cdfPoints is the empirical CDF of sorted values (a log axis needs them > 0).
func cdfPoints(sorted []float64) plotter.XYs {
	xys := make(plotter.XYs, 0, len(sorted))
	for i, v := range sorted {
		xys = append(xys, plotter.XY{X: max(v, 0.01), Y: float64(i+1) / float64(len(sorted))})
	}
	return xys
}

// cumulative counts the events up to each sorted time.
func cumulative(sorted []float64) plotter.XYs {
	xys := make(plotter.XYs, 0, len(sorted)+1)
	xys = append(xys, plotter.XY{X: 0, Y: 0})
	for i, t := range sorted {
		xys = append(xys, plotter.XY{X: t, Y: float64(i + 1)})
	}
	return xys
}
