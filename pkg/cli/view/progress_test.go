package view

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

func TestProgressText(t *testing.T) {
	full := &trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](42), EstimatedRemainingSeconds: ptr.To[int32](120),
		Metrics: []trainer.Metric{{Name: "loss", Value: "0.123"}, {Name: "accuracy", Value: "0.95"}}}
	cases := map[string]struct {
		st       *trainer.TrainerStatus
		text     string
		bar      string
		wantNone bool
	}{
		"everything": {st: full, text: "42%, ETA 2m0s, loss=0.123 accuracy=0.95",
			bar: "[############------------------]  42%  ETA 2m0s  loss=0.123 accuracy=0.95"},
		"percentage only": {st: &trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](100)}, text: "100%",
			bar: "[##############################] 100%"},
		"metrics only": {st: &trainer.TrainerStatus{Metrics: []trainer.Metric{{Name: "loss", Value: "1"}}}, text: "loss=1",
			bar: "[------------------------------]   0%  loss=1"},
		"nothing reported": {st: nil, text: "", bar: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.text, ProgressText(tc.st)); diff != "" {
				t.Errorf("progressText (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.bar, ProgressBar(tc.st)); diff != "" {
				t.Errorf("ProgressBar (-want +got):\n%s", diff)
			}
		})
	}
}

func TestProgressPrinterPlain(t *testing.T) {
	var out bytes.Buffer
	pp := NewProgressPrinter(&out, true) // a buffer is no terminal: plain lines
	pp.Update("", nil)
	pp.Update("", &trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](10)})
	pp.Update("", &trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](10)}) // unchanged: nothing
	pp.Line("TrainJob x: Running\n")
	pp.Update("", &trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](50)})
	pp.End()
	want := "progress 10%\nTrainJob x: Running\nprogress 50%\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}

func TestProgressPrinterInPlace(t *testing.T) {
	var out bytes.Buffer
	pp := &ProgressPrinter{out: &out, bar: true, inPlace: true} // as on a terminal
	pp.Update("", &trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](0)})
	pp.Update("", &trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](100)})
	pp.Line("done\n")
	want := "\r\033[K[------------------------------]   0%" + "\r\033[K[##############################] 100%" + "\ndone\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}
