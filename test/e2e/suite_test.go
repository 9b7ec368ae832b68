// Package e2e runs TrainJobs on a real local cluster (test/cluster): etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, kwok nodes, the JobSet
// and Kueue controllers and the Trainyard manager, all built from Go modules.
// Pods run on kwok's fake nodes: kwok moves them through Pending → Running →
// Succeeded (or Failed), controlled per pod by annotations and labels.
package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainyard/trainyard/test/cluster"
)

var (
	c   *cluster.Cluster
	cli client.Client
)

func TestMain(m *testing.M) {
	// Untainted: the examples apply unchanged, as on a real cluster.
	o := cluster.Options{CPUNodes: 2, GPUNodes: 2, GPUsPerNode: 4, UntaintedNodes: true}
	dir, err := os.MkdirTemp("", "trainyard-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	o.StateDir = dir
	missing, err := cluster.MissingBinaries(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if len(missing) > 0 {
		// `make test` builds them first; a bare `go test ./...` says why nothing ran.
		fmt.Fprintf(os.Stderr, "e2e: skipped, local cluster binaries missing (run `make cluster-tools`): %s\n", strings.Join(missing, ", "))
		os.Exit(0)
	}
	if os.Getenv("E2E_VERBOSE") != "" {
		o.Progress = os.Stderr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	start := time.Now()
	c, err = cluster.Up(ctx, o)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: bringing the cluster up:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "e2e: cluster up in %s (state in %s)\n", time.Since(start).Round(100*time.Millisecond), dir)
	cli = c.Client()
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "e2e: logs of every component are in %s\n", c.Logs())
	}
	if err := c.Down(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: stopping the cluster:", err)
	}
	if code == 0 {
		_ = os.RemoveAll(dir)
	}
	os.Exit(code)
}
