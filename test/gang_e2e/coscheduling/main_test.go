// Package coscheduling runs gang-scheduled TrainJobs on a local cluster
// (pkg/localcluster) with the scheduler-plugins Coscheduling scheduler and its
// PodGroup controller (Options.GangScheduler "coscheduling"), on kwok nodes of
// 32 CPUs whose pods request 20 (one per node) unless a test says otherwise, so
// that every scenario knows exactly how many pods fit. The runtime is
// examples/coscheduling/runtime.yaml, as the docs show it.
//
// The tests share one cluster and run in order; each sets the number of nodes
// it needs (setNodes) and leaves no pod behind.
package coscheduling

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// The example runtime and TrainJob the tests apply (docs/gang-scheduling.md
// shows the same files).
const (
	runtimeFile  = "examples/coscheduling/runtime.yaml"
	trainJobFile = "examples/coscheduling/trainjob.yaml"
	runtimeName  = "torch-distributed-gang"
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	repo, err := localcluster.FindRepoDir(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The nodes are untainted: the example runtime's pods carry no kwok toleration.
	o := localcluster.Options{CPUNodes: 2, UntaintedNodes: true, RepoDir: repo,
		Runtimes: []string{filepath.Join(repo, runtimeFile)}}
	missing, err := localcluster.MissingBinaries(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if len(missing) > 0 {
		// `make test` builds them first; a bare `go test ./...` says why nothing ran.
		return prereq.MainMissing("coscheduling e2e", "local cluster binaries missing (run `make cluster-tools`): "+strings.Join(missing, ", "))
	}
	// The gang scheduler is built here, only for this suite (cached in bin/k8s:
	// a warm build.sh costs nothing).
	o.GangScheduler = localcluster.GangSchedulerCoscheduling
	build := exec.Command(filepath.Join(repo, "test", "tools", "build.sh"), filepath.Join(repo, "bin", "k8s"),
		localcluster.CoschedulingScheduler, localcluster.CoschedulingController)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "coscheduling e2e: test/tools/build.sh:", err)
		return 1
	}
	if c, err = e2eutil.UpCluster("coscheduling", o); err != nil {
		fmt.Fprintln(os.Stderr, "coscheduling e2e:", err)
		return 1
	}
	cli = c.Client()
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "coscheduling e2e: logs of every component are in %s\n", c.Logs())
	}
	if err := c.Down(); err != nil {
		fmt.Fprintln(os.Stderr, "coscheduling e2e: stopping the cluster:", err)
	}
	if code == 0 {
		_ = os.RemoveAll(c.StateDir())
	}
	return code
}
