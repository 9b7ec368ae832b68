package localcluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// What a local cluster installs besides the manager, so that it offers what a
// real install does: the shipped runtimes with the local example runtime that
// `make run` trains on, and the roles the users of a namespace get.

// FashionMNISTRuntimeFile is the runtime of `make run` (Kubeflow's PyTorch guide
// on the process node), relative to the repository.
const FashionMNISTRuntimeFile = "examples/fashion-mnist/runtime.yaml"

// LocalRuntimes are the runtime files a local cluster installs by default:
// every shipped runtime (runtimes/*.yaml) and the Fashion-MNIST one.
func LocalRuntimes(repo string) ([]string, error) {
	rs, err := filepath.Glob(filepath.Join(repo, "runtimes", "*.yaml"))
	if err != nil {
		return nil, err
	}
	return append(rs, filepath.Join(repo, FashionMNISTRuntimeFile)), nil
}

// installRuntime applies a runtime file; the Fashion-MNIST runtime's hostPath
// becomes the process nodes' host path root (ProcessHostPathRoot), which is
// in the cluster's state directory rather than under /var/tmp.
func (c *Cluster) installRuntime(ctx context.Context, path string) error {
	if filepath.Base(path) != filepath.Base(FashionMNISTRuntimeFile) || filepath.Base(filepath.Dir(path)) != filepath.Base(filepath.Dir(FashionMNISTRuntimeFile)) {
		return c.ApplyFile(ctx, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if !bytes.Contains(b, []byte("path: "+fashionHostPath+"\n")) {
		return fmt.Errorf("%s: no hostPath %s to point at the process nodes' host path root", path, fashionHostPath)
	}
	objs, err := decodeYAML(bytes.ReplaceAll(b, []byte("path: "+fashionHostPath+"\n"), []byte("path: "+c.ProcessHostPathRoot()+"\n")))
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return c.Apply(ctx, objs...)
}

// UserRBACFiles are the roles of manifests/base/rbac that are for the users of
// the cluster, not the manager: trainyard-edit and trainyard-view, aggregated
// into Kubernetes' edit, admin and view ClusterRoles, read access to the
// ClusterTrainingRuntimes for every authenticated user, and the metrics
// reader. The local cluster's manager runs with an admin's kubeconfig, so the
// manager's own RBAC is not installed.
var UserRBACFiles = []string{
	"user_view_role.yaml",
	"user_edit_role.yaml",
	"runtime_reader_role.yaml",
	"runtime_reader_role_binding.yaml",
	"metrics_reader_role.yaml",
}

// installUserRBAC applies UserRBACFiles.
func (c *Cluster) installUserRBAC(ctx context.Context) error {
	for _, f := range UserRBACFiles {
		if err := c.ApplyFile(ctx, filepath.Join(c.o.RepoDir, "manifests", "base", "rbac", f)); err != nil {
			return fmt.Errorf("installing the users' roles: %w", err)
		}
	}
	return nil
}
