package localcluster

import (
	"context"
	"fmt"
)

// upBare finishes Up for Options.Bare once the API server is ready: the
// namespaces, the CRDs, the users' roles, the manager and the runtimes; none of
// the components that run pods or other controllers.
func (c *Cluster) upBare(ctx context.Context) error {
	if err := c.createNamespaces(ctx, ManagerNamespace); err != nil {
		return err
	}
	if err := c.installCRDs(ctx); err != nil {
		return err
	}
	c.progress("%d CRDs established (bare: no kube-controller-manager, scheduler, nodes, JobSet or Kueue)", len(c.crds))
	if err := c.StartManager(ctx); err != nil {
		return err
	}
	if err := c.installUserRBAC(ctx); err != nil {
		return err
	}
	for _, f := range c.o.Runtimes {
		if err := c.installRuntime(ctx, f); err != nil {
			return fmt.Errorf("installing runtime %s: %w", f, err)
		}
	}
	c.progress("bare cluster ready: %d runtimes installed", len(c.o.Runtimes))
	return nil
}
