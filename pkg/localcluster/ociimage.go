package localcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/trainyard/trainyard/pkg/images"
)

// The container nodes' images are written by pkg/images (WriteFileImage for
// the pause image and test images, `make images` for Trainyard's and the
// training images) and imported with ctr into each node's containerd.

// PauseImage is the sandbox image of the container nodes (cmd/pause), imported
// into each node's containerd before its kubelet starts.
const PauseImage = "registry.trainyard.local/pause:1"

// ImageFile is one file of an image's only layer.
type ImageFile = images.File

// WriteImageArchive writes an OCI image archive to path: one layer with
// files, and a config with entrypoint (run by the image unless a pod gives a
// command) for linux on this machine's architecture.
func WriteImageArchive(path, name string, entrypoint []string, files ...ImageFile) error {
	_, err := images.WriteFileImage(path, name, entrypoint, files...)
	return err
}

// BuildStaticBinary builds a main package of the trainyard module (pkg, e.g.
// "./cmd/pause") as a static binary at out.
func BuildStaticBinary(ctx context.Context, repoDir, pkg, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = repoDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w: %s", pkg, err, strings.TrimSpace(string(b)))
	}
	return nil
}

// ImportImage imports an image archive into the k8s.io namespace (the CRI
// plugin's) of the containerd at socket, unpacked for the overlayfs snapshotter.
func ImportImage(ctx context.Context, socket, archive string) error {
	cmd := exec.CommandContext(ctx, "ctr", "--address", socket, "--namespace", "k8s.io", "images", "import", archive)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ctr images import %s: %w: %s", archive, err, strings.TrimSpace(string(b)))
	}
	return nil
}

// ImportImages imports image archives (e.g. `make images`' bin/images/*.oci.tar)
// into the containerd of every container node, so that pods name them with
// imagePullPolicy: IfNotPresent or Never. Up imports Options.Images itself.
func (c *Cluster) ImportImages(ctx context.Context, archives ...string) error {
	for i := 0; i < c.o.ContainerNodes; i++ {
		for _, a := range archives {
			if err := ImportImage(ctx, c.ContainerNodeSocket(i), a); err != nil {
				return fmt.Errorf("container node %d: %w", i, err)
			}
		}
	}
	return nil
}
