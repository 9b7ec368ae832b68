package localcluster

import (
	"context"
	"fmt"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/utils/ptr"
)

// The container nodes' storage: a default StorageClass whose claims the
// provisioner (test/tools/provisioner, on sig-storage-lib-external-provisioner)
// binds to hostPath PersistentVolumes, a directory each under
// StateDir/container-nodes/volumes. Every node is on this host, so every
// node mounts every volume; binding is immediate (no node to wait for), and
// a released volume's directory is removed. Clusters without container nodes
// have no StorageClass.
const (
	// Provisioner is the component name (logs/provisioner.log) and the build target.
	Provisioner = "provisioner"
	// StorageClassName is the default StorageClass of a cluster with container nodes.
	StorageClassName = "local-path"
	// ProvisionerName is its provisioner.
	ProvisionerName = "trainyard.io/local-path"
)

// VolumesDir holds the container nodes' provisioned volumes, one directory each.
func (c *Cluster) VolumesDir() string {
	return filepath.Join(c.o.StateDir, "container-nodes", "volumes")
}

// startStorage starts the provisioner and creates the default StorageClass.
func (c *Cluster) startStorage(ctx context.Context) error {
	metrics, err := freePort()
	if err != nil {
		return err
	}
	p, err := c.sup.start(Provisioner, []string{c.bin(Provisioner),
		"--kubeconfig=" + c.Kubeconfig(), "--name=" + ProvisionerName, "--dir=" + c.VolumesDir(),
		fmt.Sprintf("--metrics-port=%d", metrics),
	}, false)
	if err != nil {
		return err
	}
	if err := c.waitHTTP(ctx, p, fmt.Sprintf("http://%s/metrics", loopback(metrics)), nil); err != nil {
		return err
	}
	sc := &storagev1.StorageClass{
		Provisioner:       ProvisionerName,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
	}
	sc.Name = StorageClassName
	sc.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}
	if err := c.client.Create(ctx, sc); err != nil {
		return fmt.Errorf("StorageClass %s: %w", StorageClassName, err)
	}
	c.progress("provisioner ready: default StorageClass %s, volumes in %s", StorageClassName, c.VolumesDir())
	return nil
}
