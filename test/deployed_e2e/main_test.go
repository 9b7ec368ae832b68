// Package deployed_e2e runs Trainyard as it is deployed: no manager process on
// the host, but the Helm chart (manifests/charts/trainyard) installed with
// bin/helm into a local cluster (pkg/localcluster) whose nodes are container
// nodes (real kubelets on their own containerd), with the manager image that
// `make images` builds (bin/images/trainyard-manager.oci.tar) imported into
// each node and never pulled. The manager then runs as the chart's Deployment:
// as user 65532, with the chart's flags, its webhooks called through their
// Service, its metrics served over HTTPS.
//
// The tests run in the order of their files: those that need the chart
// installed first, upgrade_test.go last (helm upgrade, helm uninstall,
// then the kustomize standalone overlay).
//
// Needs root, the local cluster binaries and the kubelet (make cluster-tools,
// test/tools/build.sh bin/k8s kubelet), the container nodes' packages
// (pkg/localcluster/packages/container-node-packages.sh), bin/helm (make helm) and the
// images (make images); `make e2e-deployed` provides them. Skipped
// otherwise, and failed under CI=true (test/prereq).
package deployed_e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/trainyard/trainyard/pkg/localcluster"
	"github.com/trainyard/trainyard/test/e2eutil"
	"github.com/trainyard/trainyard/test/prereq"
)

const (
	suite = "deployed"
	// nodes is the number of container nodes: the guide and the PyTorchJob
	// train on two.
	nodes = 2
	// release and namespace of the chart, as docs/install.md installs it.
	release   = "trainyard"
	managerNS = localcluster.ManagerNamespace
)

var (
	c    *localcluster.Cluster
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
	ctrllog.SetLogger(logr.Discard()) // the clients' logs; the manager's are its pods'
	wd, _ := os.Getwd()
	var err error
	if repo, err = localcluster.FindRepoDir(wd); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	o := localcluster.Options{
		ContainerNodes:  nodes,
		ExternalManager: true,
		// Kueue's TrainJob integration would wait for a CRD that only the
		// chart brings; these tests do not queue.
		KueueFrameworks: []string{"batch/job", "jobset.x-k8s.io/jobset"},
	}
	missing, err := localcluster.MissingBinaries(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, p := range append([]string{helmBin()}, archives()...) {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return prereq.MainMissing(suite, "missing (run `make e2e-deployed`, which builds them): "+strings.Join(missing, ", "))
	}
	if errs := localcluster.ContainerNodePrerequisites(); len(errs) > 0 {
		return prereq.MainMissing(suite, fmt.Sprintf("container nodes cannot run here: %v", errs))
	}
	if managerImage, err = localcluster.ImageRef(localcluster.ImageArchive(repo, "trainyard-manager")); err != nil {
		fmt.Fprintf(os.Stderr, "%s e2e: %v\n", suite, err)
		return 1
	}

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
	start := time.Now()
	if cs, err = kubernetes.NewForConfig(c.RESTConfig()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return code
	}
	// Importing the training images (hundreds of MiB) into each node takes
	// minutes on a busy 2-core machine.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := c.ImportImages(ctx, archives()...); err != nil {
		fmt.Fprintf(os.Stderr, "%s e2e: %v\n", suite, err)
		return code
	}
	imported := time.Now()
	fmt.Fprintf(os.Stderr, "%s e2e: %d images imported into %d nodes in %s\n", suite, len(images), nodes, imported.Sub(start).Round(100*time.Millisecond))
	if out, err := helm(ctx, installArgs()...); err != nil {
		fmt.Fprintf(os.Stderr, "%s e2e: helm install: %v\n%s\n%s", suite, err, out, describeManager(context.Background()))
		return code
	}
	fmt.Fprintf(os.Stderr, "%s e2e: chart installed (manager %s) in %s\n", suite, managerImage, time.Since(imported).Round(100*time.Millisecond))
	code = m.Run()
	return code
}

// images are the archives of make images that the tests run: the manager's
// and the initializer's, and the training images (pkg/images).
var images = []string{"trainyard-manager", "trainyard-initializer", "torch", "mpi"}

func archives() []string {
	var as []string
	for _, i := range images {
		as = append(as, localcluster.ImageArchive(repo, i))
	}
	return as
}

// archiveImage is the image name of bin/images/<name>.oci.tar.
func archiveImage(t *testing.T, name string) string {
	t.Helper()
	ref, err := localcluster.ImageRef(localcluster.ImageArchive(repo, name))
	if err != nil {
		t.Fatal(err)
	}
	return ref
}
