// Package e2eutil holds the helpers every end-to-end suite on a local cluster
// needs (test/e2e, test/gang_e2e/..., test/processnode_e2e): starting the
// cluster, waiting for a condition, a fresh namespace to run in, and the
// TrainJob of an example file.
package e2eutil

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/localcluster"
)

// WaitFor retries fn every 250 ms until it returns nil, and fails t with fn's
// last error after timeout.
func WaitFor(t testing.TB, timeout time.Duration, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not met within %s: %v", timeout, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// NewNamespace creates a namespace named prefix plus a random suffix, waits
// (up to timeout) until its default ServiceAccount exists, so that pods can be
// created in it, and deletes it when the test ends.
func NewNamespace(t testing.TB, cli client.Client, prefix string, timeout time.Duration) string {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}
	if err := cli.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Delete(ctx, ns) })
	WaitFor(t, timeout, func() error {
		return cli.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "default"}, &corev1.ServiceAccount{})
	})
	return ns.Name
}

// UpCluster starts the suite's local cluster: in a fresh temporary state
// directory unless o names one, printing each step when E2E_VERBOSE is set,
// and giving up after 5 minutes. It reports on stderr how long it took,
// prefixed with the suite's name.
func UpCluster(suite string, o localcluster.Options) (*localcluster.Cluster, error) {
	if o.StateDir == "" {
		dir, err := os.MkdirTemp("", "trainyard-"+suite+"-e2e-")
		if err != nil {
			return nil, err
		}
		o.StateDir = dir
	}
	if os.Getenv("E2E_VERBOSE") != "" {
		o.Progress = os.Stderr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	c, err := localcluster.Up(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("bringing the cluster up: %w", err)
	}
	fmt.Fprintf(os.Stderr, "%s e2e: cluster up in %s (state in %s)\n", suite, time.Since(start).Round(100*time.Millisecond), o.StateDir)
	return c, nil
}

// LoadTrainJob reads the TrainJob of a YAML file (path), strictly, as the docs
// show it: unchanged but for its namespace (and name, when given).
func LoadTrainJob(t testing.TB, path, ns, name string) *trainer.TrainJob {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var job trainer.TrainJob
	if err := yaml.UnmarshalStrict(data, &job); err != nil {
		t.Fatalf("decoding %s: %v", path, err)
	}
	job.Namespace = ns
	if name != "" {
		job.Name = name
	}
	return &job
}
