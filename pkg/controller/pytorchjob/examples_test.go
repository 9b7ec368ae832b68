package pytorchjob

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/yaml"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
)

// Every example in examples/pytorchjob decodes strictly, passes v1's
// validation and builds. In each, MASTER_ADDR and the rendezvous endpoint's
// host are the host name of exactly one pod: the one that serves them (the
// Master's TCPStore, the c10d rendezvous store, which torchrun lets only the
// agent whose host name is the endpoint's host serve).
func TestExamplesBuild(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "..", "examples", "pytorchjob", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples (%v)", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			job := &kubeflowv1.PyTorchJob{}
			if err := yaml.UnmarshalStrict(raw, job); err != nil {
				t.Fatal(err)
			}
			job.Namespace = "ns"
			if _, errs := Validate(nil, job); len(errs) > 0 {
				t.Fatalf("invalid: %v", errs)
			}
			res := build(t, job)
			hosts := map[string]int{}
			for _, rj := range res.JobSet.Spec.ReplicatedJobs {
				// An Indexed Job would replace the template's host name.
				if m := rj.Template.Spec.CompletionMode; m == nil || *m != batchv1.NonIndexedCompletion {
					t.Errorf("%s: completion mode %v, want NonIndexed", rj.Name, m)
					continue
				}
				hosts[rj.Template.Spec.Template.Spec.Hostname]++
			}
			for _, rj := range res.JobSet.Spec.ReplicatedJobs {
				for _, name := range []string{"MASTER_ADDR", "PET_RDZV_ENDPOINT"} {
					v := envValue(rj.Template.Spec.Template.Spec.Containers[0].Env, name)
					if v == "<unset>" {
						continue
					}
					host, _, _ := strings.Cut(v, ":")
					if hosts[host] != 1 {
						t.Errorf("%s: %s=%s, but %d pods have the host name %s (host names: %v)", rj.Name, name, v, hosts[host], host, hosts)
					}
				}
			}
		})
	}
}
