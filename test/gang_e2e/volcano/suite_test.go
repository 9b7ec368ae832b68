// Package volcano runs TrainJobs under the real Volcano scheduler (v1.10.0,
// test/tools/volcano) on a local cluster (pkg/localcluster,
// GangScheduler: "volcano") of kwok nodes small enough that every scenario is
// exact: each node holds one 20-CPU trainer pod (examples/volcano), and the
// cluster starts with two of them.
//
// The scenarios share the cluster and run in order (TestVolcanoGang): a
// 3-node job on the default scheduler starts 2 of its pods, proving the
// capacity; the same job under Volcano binds none and says why until a third
// node appears, then all 3 bind and it completes; of two 2-node jobs on 3
// nodes one runs whole and the other waits whole, never 2+1.
package volcano

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
	c    *localcluster.Cluster
	cli  client.Client
	wcli client.WithWatch
	repo string
)

// runtimeFile is the runtime (and its Volcano queue) the docs show; the
// cluster applies it once the manager is up.
const runtimeFile = "examples/volcano/runtime.yaml"

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	var err error
	if repo, err = localcluster.FindRepoDir("."); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Two 32-CPU nodes: room for two of the example's 20-CPU pods.
	o := localcluster.Options{CPUNodes: 2, UntaintedNodes: true, GangScheduler: localcluster.GangSchedulerVolcano,
		Runtimes: []string{filepath.Join(repo, runtimeFile)}}
	if missing, err := localcluster.MissingBinaries(localcluster.Options{}); err != nil || len(missing) > 0 {
		// `make test` builds the cluster first; a bare `go test ./...` says why nothing ran.
		return prereq.MainMissing("volcano e2e", fmt.Sprintf("local cluster binaries missing (run `make cluster-tools`): %s %v", strings.Join(missing, ", "), err))
	}
	// Volcano is built only for the tests (and clusters) that use it; a
	// warm build.sh costs nothing.
	build := exec.Command(filepath.Join(repo, "test", "tools", "build.sh"), filepath.Join(repo, "bin", "k8s"), localcluster.VolcanoScheduler, localcluster.VolcanoControllers)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "volcano e2e: test/tools/build.sh:", err)
		return 1
	}
	if c, err = e2eutil.UpCluster("volcano", o); err != nil {
		fmt.Fprintln(os.Stderr, "volcano e2e:", err)
		return 1
	}
	cli = c.Client()
	if wcli, err = client.NewWithWatch(c.RESTConfig(), client.Options{Scheme: localcluster.Scheme()}); err != nil {
		fmt.Fprintln(os.Stderr, "volcano e2e: watch client:", err)
		_ = c.Down()
		return 1
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "volcano e2e: logs of every component are in %s\n", c.Logs())
	}
	if err := c.Down(); err != nil {
		fmt.Fprintln(os.Stderr, "volcano e2e: stopping the cluster:", err)
	}
	if code == 0 {
		_ = os.RemoveAll(c.StateDir())
	}
	return code
}
