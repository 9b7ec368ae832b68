package localcluster

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/trainyard/trainyard/pkg/version"
)

// installVersion creates or updates the public ConfigMap with the control
// plane's version (pkg/version.ConfigMap) in the manager's namespace, as the
// manifests install it, so that `trainyard version` and Kubeflow's SDK find it
// on the local cluster too. The version is that of the manager binary the
// cluster runs. The ConfigMap is for information only (the SDK merely warns
// without it), so a failure is reported and does not stop the cluster.
//
// A copy goes to the Kubeflow SDK's default namespace (version.SDKNamespace,
// kubeflow-system), as the manifests install it (manifests/kubeflow-system),
// so that the SDK finds it without $KUBEFLOW_SYSTEM_NAMESPACE.
func (c *Cluster) installVersion(ctx context.Context) {
	if err := c.applyVersion(ctx); err != nil {
		c.progress("warning: version ConfigMap %s not installed: %v", version.ConfigMapName, err)
	}
}

func (c *Cluster) applyVersion(ctx context.Context) error {
	v, err := binaryVersion(ctx, c.o.ManagerBinary)
	if err != nil {
		return err
	}
	ns := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]interface{}{"name": version.SDKNamespace},
	}}
	objs := []*unstructured.Unstructured{ns}
	for _, namespace := range []string{ManagerNamespace, version.SDKNamespace} {
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(version.ConfigMap(namespace, v))
		if err != nil {
			return fmt.Errorf("converting the ConfigMap: %w", err)
		}
		objs = append(objs, &unstructured.Unstructured{Object: obj})
	}
	return c.Apply(ctx, objs...)
}

// binaryVersion runs `<binary> --version`, which prints the version first
// (cmd/trainyard-manager).
func binaryVersion(ctx context.Context, binary string) (string, error) {
	var out, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, binary, "--version")
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s --version: %w: %s", binary, err, strings.TrimSpace(stderr.String()))
	}
	fields := strings.Fields(out.String())
	if len(fields) == 0 {
		return "", fmt.Errorf("%s --version printed nothing", binary)
	}
	return fields[0], nil
}
