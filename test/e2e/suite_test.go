// Package e2e runs TrainJobs on a real local cluster (pkg/localcluster): etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, kwok nodes, the JobSet
// and Kueue controllers and the Trainyard manager, all built from Go modules.
// Pods run on kwok's fake nodes: kwok moves them through Pending → Running →
// Succeeded (or Failed), controlled per pod by annotations and labels.
package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainyard/trainyard/pkg/localcluster"
	"github.com/trainyard/trainyard/test/e2eutil"
	"github.com/trainyard/trainyard/test/prereq"
)

var (
	c   *localcluster.Cluster
	cli client.Client
)

func TestMain(m *testing.M) {
	// Untainted: the examples apply unchanged, as on a real cluster.
	o := localcluster.Options{CPUNodes: 2, GPUNodes: 2, GPUsPerNode: 4, UntaintedNodes: true}
	missing, err := localcluster.MissingBinaries(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// `make test` builds them first; a bare `go test ./...` says why nothing ran.
	prereq.MainRequire("e2e", len(missing) == 0, "local cluster binaries missing (run `make cluster-tools`): "+strings.Join(missing, ", "))
	if c, err = e2eutil.UpCluster("e2e", o); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	cli = c.Client()
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "e2e: logs of every component are in %s\n", c.Logs())
	}
	if err := c.Down(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: stopping the cluster:", err)
	}
	if code == 0 {
		_ = os.RemoveAll(c.StateDir())
	}
	os.Exit(code)
}
