package trainjob

import (
	"path/filepath"
	"testing"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/childsync"
	trruntime "github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/plugins"
	rtt "github.com/trainyard/trainyard/test/util/rtt"
)

// BenchmarkRender is the manager's CPU work per TrainJob before its JobSet is
// written: validation, the plugin pipeline, the runtime snapshot, and (in
// BenchmarkRenderAndHash) the hashes childsync puts on the JobSet.
func BenchmarkRender(b *testing.B) {
	r, job, rt := benchInputs(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Render(job, rt); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRenderAndHash(b *testing.B) {
	r, job, rt := benchInputs(b)
	b.ReportAllocs()
	for b.Loop() {
		p, err := r.Render(job, rt)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := childsync.Hashes(p.JobSet()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeSnapshot is what re-rendering a suspended JobSet costs on top
// of rendering: reading the runtime back from the JobSet's annotation.
func BenchmarkDecodeSnapshot(b *testing.B) {
	r, job, rt := benchInputs(b)
	p, err := r.Render(job, rt)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := trruntime.DecodeRuntime(p.JobSet().Annotations[SnapshotAnnotation]); err != nil {
			b.Fatal(err)
		}
	}
}

func benchInputs(b *testing.B) (*Adapter, *trainer.TrainJob, *trruntime.Runtime) {
	b.Helper()
	rt, err := rtt.TorchDistributedRuntime()
	if err != nil {
		b.Fatal(err)
	}
	job, err := rtt.LoadTrainJobFile(filepath.Join(rtt.RepoRoot(), "examples", "trainjob-torch.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	job.Namespace, job.UID = "default", "0f5b5d1c-8e2a-4c53-9a43-1d1d5e0e7a11"
	fw, err := plugins.NewFramework()
	if err != nil {
		b.Fatal(err)
	}
	return &Adapter{Framework: fw}, job, rt
}
