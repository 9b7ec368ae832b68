package localcluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	crand "crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	trruntime "github.com/trainyard/trainyard/pkg/runtime"
)

// cniBinDir is where Debian's containernetworking-plugins puts the plugins.
const cniBinDir = "/usr/lib/cni"

// writeContainerNodeFiles writes node i's containerd config.toml, CNI
// network, certificates, kubeconfig and KubeletConfiguration.
func (c *Cluster) writeContainerNodeFiles(i int, node containerNode) error {
	dir := c.ContainerNodeDir(i)
	for _, d := range []string{"containerd", "cni/net.d", "cni/ipam", "kubelet", "pki", "pod-logs", "volume-plugins"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "containerd", "config.toml"), []byte(containerdConfig(dir, !hasCapSysResource())), 0o644); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(dir, "cni", "net.d", "10-trainyard.conflist"), cniConfig(dir, i, node)); err != nil {
		return err
	}
	name := ContainerNodeName(i)
	pk := filepath.Join(dir, "pki")
	if err := c.pki.issue(filepath.Join(pk, "kubelet-client.crt"), filepath.Join(pk, "kubelet-client.key"),
		pkix.Name{CommonName: "system:node:" + name, Organization: []string{"system:nodes"}}, x509.ExtKeyUsageClientAuth, nil, nil); err != nil {
		return fmt.Errorf("kubelet client certificate: %w", err)
	}
	if err := c.pki.issue(filepath.Join(pk, "kubelet.crt"), filepath.Join(pk, "kubelet.key"), pkix.Name{CommonName: name},
		x509.ExtKeyUsageServerAuth, []string{name, "localhost"}, []net.IP{net.ParseIP(node.ip), net.IPv4(127, 0, 0, 1)}); err != nil {
		return fmt.Errorf("kubelet serving certificate: %w", err)
	}
	if err := c.writeNodeKubeconfig(filepath.Join(dir, "kubeconfig"), filepath.Join(pk, "kubelet-client.crt"), filepath.Join(pk, "kubelet-client.key")); err != nil {
		return err
	}
	return writeJSON(filepath.Join(dir, "kubelet.yaml"), c.kubeletConfig(dir, node))
}

// containerdConfig is a containerd 1.6 configuration (version 2) with
// everything under dir: only the CRI plugin matters, with the overlayfs
// snapshotter, runc (cgroupfs, its state under dir) and the node's CNI network.
// restrictOOM caps the containers' oom_score_adj at containerd's own: without
// CAP_SYS_RESOURCE (root lacks it on some VMs) runc cannot lower it to the
// kubelet's -998 for the sandbox and every pod fails to start ("failed to
// update /proc/self/oom_score_adj: Permission denied").
func containerdConfig(dir string, restrictOOM bool) string {
	cd := filepath.Join(dir, "containerd")
	return fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]

[grpc]
  address = %q

[plugins."io.containerd.internal.v1.opt"]
  path = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  disable_apparmor = true
  restrict_oom_score_adj = %t
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
    max_conf_num = 1
`, filepath.Join(cd, "root"), filepath.Join(cd, "state"), filepath.Join(cd, "containerd.sock"),
		filepath.Join(cd, "opt"), PauseImage, restrictOOM, filepath.Join(cd, "runc"), cniBinDir, filepath.Join(dir, "cni", "net.d"))
}

// cniConfig is node i's pod network: a bridge of its own with the node's /24
// (host-local IPAM, its allocations under the node's directory), the host as
// gateway, and portmap for hostPorts. No masquerading: the pods reach the
// host and each other, not beyond (and leave no iptables rules behind when
// Down has to remove them without the CNI DEL).
func cniConfig(dir string, i int, node containerNode) map[string]interface{} {
	return map[string]interface{}{
		"cniVersion": "0.4.0",
		"name":       "trainyard-" + ContainerNodeName(i),
		"plugins": []interface{}{
			map[string]interface{}{
				"type": "bridge", "bridge": node.bridge, "isGateway": true, "ipMasq": false, "hairpinMode": true,
				"ipam": map[string]interface{}{
					"type": "host-local", "dataDir": filepath.Join(dir, "cni", "ipam"),
					"ranges": [][]map[string]string{{{"subnet": node.podCIDR}}},
					"routes": []map[string]string{{"dst": "0.0.0.0/0"}},
				},
			},
			map[string]interface{}{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
}

// kubeletConfig is node i's KubeletConfiguration.
func (c *Cluster) kubeletConfig(dir string, node containerNode) map[string]interface{} {
	pk := filepath.Join(dir, "pki")
	return map[string]interface{}{
		"apiVersion": "kubelet.config.k8s.io/v1beta1",
		"kind":       "KubeletConfiguration",
		// Kubernetes ≥ 1.35 refuses cgroup v1 unless told (KEP-5573); the
		// machines this runs on have cgroup v1.
		"failCgroupV1": false,
		// containerd 1.6 does not answer the CRI RuntimeConfig call, so the
		// kubelet takes the driver from here; runc is configured to match.
		"cgroupDriver":             "cgroupfs",
		"cgroupRoot":               node.cgroupRoot,
		"containerRuntimeEndpoint": "unix://" + filepath.Join(dir, "containerd", "containerd.sock"),
		"address":                  node.ip,
		"port":                     node.kubeletPort,
		"readOnlyPort":             0,
		"healthzBindAddress":       "127.0.0.1",
		"healthzPort":              node.health,
		"tlsCertFile":              filepath.Join(pk, "kubelet.crt"),
		"tlsPrivateKeyFile":        filepath.Join(pk, "kubelet.key"),
		"authentication": map[string]interface{}{
			"anonymous": map[string]bool{"enabled": false},
			"webhook":   map[string]bool{"enabled": true},
			"x509":      map[string]string{"clientCAFile": c.pki.caCert()},
		},
		"authorization":   map[string]string{"mode": "Webhook"},
		"clusterDNS":      []string{ClusterDNS},
		"clusterDomain":   trruntime.DefaultClusterDomain,
		"staticPodPath":   "",
		"registerNode":    true,
		"podCIDR":         node.podCIDR,
		"podLogsDir":      filepath.Join(dir, "pod-logs"),
		"volumePluginDir": filepath.Join(dir, "volume-plugins"),
		"failSwapOn":      false,
		"maxPods":         c.o.PodsPerNode,
		// A development machine's disk is often fuller than the defaults
		// (85 % for image GC, 10 % free for eviction) allow.
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		"evictionHard":                map[string]string{"memory.available": "1Mi", "nodefs.available": "1%", "imagefs.available": "1%", "nodefs.inodesFree": "1%"},
		"serializeImagePulls":         false,
		// The kubelet rewrites a pod's Secret and ConfigMap volumes only when
		// it syncs the pod, every syncFrequency (default 1 min, plus jitter),
		// though it watches the objects themselves (Watch). A manager
		// that writes its webhook certificate into its own Secret waits that
		// long to become Ready; a local cluster wants seconds, and a handful of
		// pods per node makes the extra syncs cheap.
		"syncFrequency": "5s",
		"configMapAndSecretChangeDetectionStrategy": "Watch",
	}
}

// writeNodeKubeconfig writes a kubeconfig for the cluster with a client certificate.
func (c *Cluster) writeNodeKubeconfig(path, cert, key string) error {
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: trainyard-local
  cluster: {server: "https://%s", certificate-authority: %q}
users:
- name: node
  user: {client-certificate: %q, client-key: %q}
contexts:
- name: trainyard-local
  context: {cluster: trainyard-local, user: node}
current-context: trainyard-local
`, c.apiserverAddr(), c.pki.caCert(), cert, key)
	return os.WriteFile(path, []byte(kc), 0o600)
}

// issue writes a certificate and ECDSA key signed by the cluster CA.
func (p pki) issue(certPath, keyPath string, subj pkix.Name, usage x509.ExtKeyUsage, dns []string, ips []net.IP) error {
	ca, err := tls.LoadX509KeyPair(p.caCert(), p.caKey())
	if err != nil {
		return err
	}
	caCert, err := x509.ParseCertificate(ca.Certificate[0])
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), crand.Reader)
	if err != nil {
		return err
	}
	now := time.Now().Add(-time.Hour)
	tmpl := &x509.Certificate{SerialNumber: serial(), Subject: subj, NotBefore: now, NotAfter: now.Add(365 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, DNSNames: dns, IPAddresses: ips}
	der, err := x509.CreateCertificate(crand.Reader, tmpl, caCert, &key.PublicKey, ca.PrivateKey)
	if err != nil {
		return err
	}
	if err := writeCert(certPath, der); err != nil {
		return err
	}
	return writeKey(keyPath, key)
}

// hasCapSysResource reports whether this process has CAP_SYS_RESOURCE (the
// capability to lower an oom_score_adj).
func hasCapSysResource() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && caps&(1<<24) != 0 // CAP_SYS_RESOURCE
		}
	}
	return false
}

// freePort returns a port that is free now, from the range freePorts uses.
func freePort() (int, error) {
	low, high := portRange()
	for try := 0; try < 200; try++ {
		l, err := net.Listen("tcp", fmt.Sprintf(":%d", low+rand.IntN(high-low)))
		if err == nil {
			port := l.Addr().(*net.TCPAddr).Port
			_ = l.Close()
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free port in [%d, %d)", low, high)
}

// stateHash names a state directory's host-wide objects (bridges, cgroups),
// so that two clusters' never collide.
func stateHash(stateDir string) string {
	s := sha256.Sum256([]byte(stateDir))
	return hex.EncodeToString(s[:4])
}

// containerBridge is node i's bridge: at most 15 characters.
func containerBridge(stateDir string, i int) string {
	return fmt.Sprintf("tyc%s%d", stateHash(stateDir), i)
}

// containerCgroupRoot is node i's cgroup root (the kubelet's cgroupRoot).
func containerCgroupRoot(stateDir string, i int) string {
	return fmt.Sprintf("/trainyard-%s-%s", stateHash(stateDir), ContainerNodeName(i))
}
