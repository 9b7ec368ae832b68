package localcluster

import (
	"context"
	"fmt"
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
