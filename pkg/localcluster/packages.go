package localcluster

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"os/exec"
	"strings"
)

// The Debian packages the local cluster's nodes run on, installed by the
// scripts of packages/ (each a no-op once its packages are there): the process
// node's pods (torch, OpenMPI with sshd and mpi4py, XGBoost, the Fashion-MNIST
// data, debootstrap for the images) and the container nodes (containerd, runc,
// the CNI plugins, iptables). They are part of the local cluster, which
// trainyard-local runs from its binary alone; `make debian-packages` and
// `make deployed-tools` run the same files.
var (
	//go:embed packages/debian-packages.sh
	debianPackagesScript string
	//go:embed packages/container-node-packages.sh
	containerNodePackagesScript string
)

// Where the scripts are in the repository, for messages and the Makefile.
const (
	DebianPackagesScript        = "pkg/localcluster/packages/debian-packages.sh"
	ContainerNodePackagesScript = "pkg/localcluster/packages/container-node-packages.sh"
)

// InstallDebianPackages installs what the process node's pods run, when missing.
func InstallDebianPackages(ctx context.Context, out io.Writer) error {
	return runScript(ctx, "debian-packages.sh", debianPackagesScript, out)
}

// InstallContainerNodePackages installs what the container nodes run on, when
// missing.
func InstallContainerNodePackages(ctx context.Context, out io.Writer) error {
	return runScript(ctx, "container-node-packages.sh", containerNodePackagesScript, out)
}

// runScript runs an embedded bash script, its output on out.
func runScript(ctx context.Context, name, script string, out io.Writer) error {
	cmd := exec.CommandContext(ctx, "bash", "-s", "--", name)
	cmd.Stdin = strings.NewReader(script)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}
