// Command provisioner is the local cluster's volume provisioner for its
// container nodes (pkg/localcluster/containernode_storage.go): every
// PersistentVolumeClaim of its StorageClass gets a hostPath
// PersistentVolume, a directory of its own under --dir. All container nodes
// are on this host, so every node mounts every such volume. The claim
// handling (watching claims, naming and creating the PersistentVolume,
// retries, deleting the PersistentVolume when it is released) is
// sig-storage-lib-external-provisioner's; this command only makes and removes
// the directories.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

// hostPathProvisioner makes a directory per volume under dir.
type hostPathProvisioner struct{ dir string }

func (p hostPathProvisioner) Provision(_ context.Context, o controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	if o.PVC.Spec.VolumeMode != nil && *o.PVC.Spec.VolumeMode == corev1.PersistentVolumeBlock {
		return nil, controller.ProvisioningFinished, errors.New("only filesystem volumes: a hostPath directory is no block device")
	}
	path := filepath.Join(p.dir, o.PVName)
	if err := os.MkdirAll(path, 0o755); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	// Writable by the pods' users whatever they are (images run as non-root).
	if err := os.Chmod(path, 0o777); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	reclaim := corev1.PersistentVolumeReclaimDelete
	if o.StorageClass.ReclaimPolicy != nil {
		reclaim = *o.StorageClass.ReclaimPolicy
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: o.PVName},
		Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: reclaim,
			AccessModes:                   o.PVC.Spec.AccessModes,
			MountOptions:                  o.StorageClass.MountOptions,
			// The claim's request: a directory has no size of its own.
			Capacity: corev1.ResourceList{corev1.ResourceStorage: o.PVC.Spec.Resources.Requests[corev1.ResourceStorage]},
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: path, Type: ptrTo(corev1.HostPathDirectory)},
			},
		},
	}
	return pv, controller.ProvisioningFinished, nil
}

func (p hostPathProvisioner) Delete(_ context.Context, pv *corev1.PersistentVolume) error {
	hp := pv.Spec.HostPath
	if hp == nil || filepath.Dir(hp.Path) != p.dir || !strings.HasPrefix(filepath.Base(hp.Path), "pvc-") {
		return &controller.IgnoredError{Reason: "not a volume of this provisioner's directory"}
	}
	return os.RemoveAll(hp.Path)
}

func ptrTo[T any](v T) *T { return &v }

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster")
	name := flag.String("name", "trainyard.io/local-path", "the provisioner name of its StorageClass")
	dir := flag.String("dir", "", "directory the volumes are made in")
	metrics := flag.Int("metrics-port", 0, "port of /metrics on 127.0.0.1 (0: none)")
	klog.InitFlags(nil)
	flag.Parse()
	if err := run(*kubeconfig, *name, *dir, *metrics); err != nil {
		fmt.Fprintln(os.Stderr, "provisioner:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, name, dir string, metrics int) error {
	if dir == "" || !filepath.IsAbs(dir) {
		return errors.New("--dir must be an absolute directory")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	pc := controller.NewProvisionController(ctx, cs, name, hostPathProvisioner{dir: filepath.Clean(dir)},
		controller.LeaderElection(false),
		controller.MetricsAddress("127.0.0.1"), controller.MetricsPort(int32(metrics)))
	pc.Run(ctx)
	return nil
}
