// Package deployed_e2e runs Trainyard as it is deployed: no manager process on
// the host, but the Helm chart (manifests/charts/trainyard) installed with
// bin/helm into a local cluster (test/cluster) whose nodes are container
// nodes (real kubelets on their own containerd), with the manager image that
// `make images` builds (bin/images/trainyard-manager.oci.tar) imported into
// each node and never pulled. The manager then runs as the chart's Deployment:
// as user 65532, with the chart's flags, its webhooks called through their
// Service, its metrics served over HTTPS.
//
// The tests run in the order of their files: those that need the chart
// installed first, lifecycle_test.go last (helm upgrade, helm uninstall,
// then the kustomize standalone overlay).
//
// Needs root, the local cluster binaries and the kubelet (make cluster-tools,
// test/tools/build.sh bin/k8s kubelet), the container nodes' packages
// (test/tools/container-node-packages.sh), bin/helm (make helm) and the
// images (make images); `make e2e-deployed` provides them. Skipped
// otherwise, and failed under CI=true (test/prereq).
package deployed_e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/trainyard/trainyard/test/cluster"
	"github.com/trainyard/trainyard/test/e2eutil"
	"github.com/trainyard/trainyard/test/images"
	"github.com/trainyard/trainyard/test/prereq"
)

const (
	suite = "deployed"
	// nodes is the number of container nodes: the guide and the PyTorchJob
	// train on two.
	nodes = 2
	// release and namespace of the chart, as docs/install.md installs it.
	release   = "trainyard"
	managerNS = cluster.ManagerNamespace
)

var (
	c    *cluster.Cluster
	cs   kubernetes.Interface
	repo string
	// managerImage is the manager image's reference in the nodes
	// (trainyard.local/trainyard-manager:<version>).
	managerImage string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	wd, _ := os.Getwd()
	var err error
	if repo, err = cluster.FindRepoDir(wd); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	o := cluster.Options{
		ContainerNodes:  nodes,
		ExternalManager: true,
		// Kueue's TrainJob integration would wait for a CRD that only the
		// chart brings; these tests do not queue.
		KueueFrameworks: []string{"batch/job", "jobset.x-k8s.io/jobset"},
	}
	missing, err := cluster.MissingBinaries(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	managerArchive := filepath.Join(repo, "bin", "images", "trainyard-manager.oci.tar")
	for _, p := range []string{helmBin(), managerArchive} {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return prereq.MainMissing(suite, "missing (run `make e2e-deployed`, which builds them): "+strings.Join(missing, ", "))
	}
	if errs := cluster.ContainerNodePrerequisites(); len(errs) > 0 {
		return prereq.MainMissing(suite, fmt.Sprintf("container nodes cannot run here: %v", errs))
	}
	idx, err := images.ReadIndex(managerArchive)
	if err != nil || len(idx.Manifests) != 1 {
		fmt.Fprintf(os.Stderr, "%s e2e: %s: %v\n", suite, managerArchive, err)
		return 1
	}
	managerImage = idx.Manifests[0].Annotations["io.containerd.image.name"]

	start := time.Now()
	if c, err = e2eutil.UpCluster(suite, o); err != nil {
		fmt.Fprintf(os.Stderr, "%s e2e: %v\n", suite, err)
		return 1
	}
	code := 1
	defer func() {
		if code != 0 {
			fmt.Fprintf(os.Stderr, "%s e2e: logs of every component are in %s\n", suite, c.Logs())
		}
		if err := c.Down(); err != nil {
			fmt.Fprintf(os.Stderr, "%s e2e: stopping the cluster: %v\n", suite, err)
		}
		if code == 0 {
			_ = os.RemoveAll(c.StateDir())
		}
	}()
	if cs, err = kubernetes.NewForConfig(c.RESTConfig()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return code
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	if err := importImage(ctx, managerArchive); err != nil {
		fmt.Fprintf(os.Stderr, "%s e2e: %v\n", suite, err)
		return code
	}
	if out, err := helm(ctx, installArgs()...); err != nil {
		fmt.Fprintf(os.Stderr, "%s e2e: helm install: %v\n%s\n%s", suite, err, out, describeManager(ctx))
		return code
	}
	fmt.Fprintf(os.Stderr, "%s e2e: cluster up and chart installed (manager %s) in %s\n", suite, managerImage, time.Since(start).Round(100*time.Millisecond))
	code = m.Run()
	return code
}

// importImage imports an OCI image archive into every container node's
// containerd, where the kubelets find it without pulling.
func importImage(ctx context.Context, archive string) error {
	for i := 0; i < nodes; i++ {
		if err := cluster.ImportImage(ctx, c.ContainerNodeSocket(i), archive); err != nil {
			return fmt.Errorf("node %d: %w", i, err)
		}
	}
	return nil
}
