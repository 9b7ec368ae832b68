package metrics

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/trainyard/trainyard/pkg/version"
)

func TestBuildInfo(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(BuildInfo(version.Info{Version: "v0.1.0-3-g1a2b3c4", GitCommit: "1a2b3c4d", GoVersion: "go1.26.1"}))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	type sample struct {
		Name   string
		Labels map[string]string
		Value  float64
	}
	var got []sample
	for _, f := range families {
		for _, m := range f.GetMetric() {
			s := sample{Name: f.GetName(), Labels: map[string]string{}, Value: m.GetGauge().GetValue()}
			for _, l := range m.GetLabel() {
				s.Labels[l.GetName()] = l.GetValue()
			}
			got = append(got, s)
		}
	}
	want := []sample{{Name: "trainyard_build_info", Value: 1,
		Labels: map[string]string{"version": "v0.1.0-3-g1a2b3c4", "git_commit": "1a2b3c4d", "go_version": "go1.26.1"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("gathered (-want +got):\n%s", diff)
	}
}
