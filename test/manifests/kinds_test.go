package manifests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/trainyard/trainyard/pkg/controller"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
)

// TestChartKindsUpToDate: the chart's files/kinds.yaml is what make generate
// writes from the kinds (jobframework.ChartKinds).
func TestChartKindsUpToDate(t *testing.T) {
	committed, err := os.ReadFile(filepath.Join(repoRoot, chartDir, "files", "kinds.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(jobframework.ChartKinds(controller.Kinds())), string(committed)); diff != "" {
		t.Errorf("%s/files/kinds.yaml is stale; run 'make generate' (-generated +committed):\n%s", chartDir, diff)
	}
}

// TestChartValuesCoverKinds: every kind the chart can turn off has its value
// in values.yaml (enabled by default, each key of its flags there) and in the
// values' schema (enabled and each key, nothing else), so that a user can
// find, and set, what the kind's package declares.
func TestChartValuesCoverKinds(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatal(err)
	}
	raw, err = os.ReadFile(filepath.Join(repoRoot, chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties map[string]struct {
			Properties map[string]any `json:"properties"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, k := range controller.Kinds() {
		c, ok := k.(jobframework.Charted)
		if !ok {
			continue
		}
		n++
		ch := c.Chart()
		v, ok := values[ch.Value].(map[string]any)
		if !ok {
			t.Errorf("%s: values.yaml has no %s", k.Name(), ch.Value)
			continue
		}
		if v["enabled"] != true {
			t.Errorf("%s: values.yaml's %s.enabled is %v, want true", k.Name(), ch.Value, v["enabled"])
		}
		want := []string{"enabled"}
		for _, f := range ch.Flags {
			want = append(want, f.Key)
			if _, ok := v[f.Key]; !ok {
				t.Errorf("%s: values.yaml's %s has no %s (--%s)", k.Name(), ch.Value, f.Key, f.Flag)
			}
		}
		var got []string
		for key := range schema.Properties[ch.Value].Properties {
			got = append(got, key)
		}
		slices.Sort(want)
		slices.Sort(got)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: values.schema.json's %s keys (-want +got):\n%s", k.Name(), ch.Value, diff)
		}
	}
	if n == 0 {
		t.Fatal("no kind the chart can turn off")
	}
}
