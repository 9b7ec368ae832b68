package kueue

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
)

func TestEnforcePodGroupPolicy(t *testing.T) {
	cases := map[string]struct {
		mode          Mode
		jobLabels     map[string]string
		jobSetLabels  map[string]string // from the runtime and overrides
		wantLabels    map[string]string
		wantQueueName string
	}{
		"jobset mode: queue and priority go on the JobSet, which the queue starts": {
			mode:          ModeJobSet,
			jobLabels:     map[string]string{QueueNameLabel: "lq", PriorityClassLabel: "high", "other": "x"},
			jobSetLabels:  map[string]string{"team": "a"},
			wantLabels:    map[string]string{"team": "a", QueueNameLabel: "lq", PriorityClassLabel: "high"},
			wantQueueName: "lq",
		},
		"jobset mode: no queue, nothing changes": {
			mode:         ModeJobSet,
			jobSetLabels: map[string]string{"team": "a"},
			wantLabels:   map[string]string{"team": "a"},
		},
		"trainjob mode: Kueue queues the TrainJob, so the JobSet loses the queue labels": {
			mode:         ModeTrainJob,
			jobLabels:    map[string]string{QueueNameLabel: "lq"},
			jobSetLabels: map[string]string{QueueNameLabel: "lq", PriorityClassLabel: "high", "team": "a"},
			wantLabels:   map[string]string{"team": "a"},
		},
		"trainjob mode: a v2.1 queue label only in spec.labels queues the JobSet": {
			mode:          ModeTrainJob,
			jobSetLabels:  map[string]string{QueueNameLabel: "lq"},
			wantLabels:    map[string]string{QueueNameLabel: "lq"},
			wantQueueName: "lq",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			info := &runtime.Info{Labels: tc.jobSetLabels}
			job := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "j", Labels: tc.jobLabels}}
			before := job.DeepCopy()
			if err := New(tc.mode).EnforcePodGroupPolicy(info, runtime.TrainJobRequest(job)); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantLabels, info.Labels); diff != "" {
				t.Errorf("JobSet labels (-want +got):\n%s", diff)
			}
			if info.QueueName != tc.wantQueueName {
				t.Errorf("QueueName = %q, want %q", info.QueueName, tc.wantQueueName)
			}
			if diff := cmp.Diff(before, job); diff != "" {
				t.Errorf("the TrainJob was modified:\n%s", diff)
			}
		})
	}
}

func TestValidateEmptyQueue(t *testing.T) {
	job := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{QueueNameLabel: ""}}}
	errs := New(ModeJobSet).Validate(nil, runtime.TrainJobRequest(job))
	if len(errs) != 1 || errs[0].Field != "metadata.labels[kueue.x-k8s.io/queue-name]" {
		t.Fatalf("errors = %v", errs)
	}
}

func TestParseMode(t *testing.T) {
	for _, ok := range []string{"trainjob", "jobset"} {
		if _, err := ParseMode(ok); err != nil {
			t.Errorf("ParseMode(%q): %v", ok, err)
		}
	}
	if _, err := ParseMode("pods"); err == nil {
		t.Error("ParseMode(pods) accepted")
	}
}
