package cluster

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteImageArchive reads back the OCI layout: every blob is named by its
// digest, the index names the image and its manifest, the manifest the
// config and the layer, and the layer holds the file.
func TestWriteImageArchive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "img.tar")
	if err := WriteImageArchive(path, "registry.trainyard.local/x:1", []string{"/bin/x"}, ImageFile{Path: "/bin/x", Data: []byte("#!"), Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		files[h.Name] = b
	}
	if string(files["oci-layout"]) != `{"imageLayoutVersion":"1.0.0"}` {
		t.Errorf("oci-layout: %q", files["oci-layout"])
	}
	for name, b := range files {
		if d, ok := strings.CutPrefix(name, "blobs/sha256/"); ok && digest(b) != "sha256:"+d {
			t.Errorf("blob %s has digest %s", name, digest(b))
		}
	}
	type desc struct {
		Digest      string
		Annotations map[string]string
	}
	var index struct{ Manifests []desc }
	if err := json.Unmarshal(files["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("index.json: %s (%v)", files["index.json"], err)
	}
	if n := index.Manifests[0].Annotations["io.containerd.image.name"]; n != "registry.trainyard.local/x:1" {
		t.Errorf("image name %q", n)
	}
	var manifest struct {
		Config desc
		Layers []desc
	}
	if err := json.Unmarshal(files["blobs/sha256/"+strings.TrimPrefix(index.Manifests[0].Digest, "sha256:")], &manifest); err != nil || len(manifest.Layers) != 1 {
		t.Fatalf("manifest: %v", err)
	}
	var config struct {
		Config struct{ Entrypoint []string }
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	if err := json.Unmarshal(files["blobs/sha256/"+strings.TrimPrefix(manifest.Config.Digest, "sha256:")], &config); err != nil {
		t.Fatal(err)
	}
	if len(config.Config.Entrypoint) != 1 || config.Config.Entrypoint[0] != "/bin/x" || len(config.RootFS.DiffIDs) != 1 {
		t.Errorf("config: %+v", config)
	}
}

// TestContainerNodeConfigs checks what the container nodes' configurations
// must say for this machine's kind of host (cgroup v1, no image pulls).
func TestContainerNodeConfigs(t *testing.T) {
	dir := "/state/container-nodes/0"
	cd := containerdConfig(dir, true)
	for _, want := range []string{`snapshotter = "overlayfs"`, "SystemdCgroup = false", `bin_dir = "/usr/lib/cni"`,
		`conf_dir = "/state/container-nodes/0/cni/net.d"`, `sandbox_image = "` + PauseImage + `"`,
		`address = "/state/container-nodes/0/containerd/containerd.sock"`, "restrict_oom_score_adj = true"} {
		if !strings.Contains(cd, want) {
			t.Errorf("containerd config lacks %s:\n%s", want, cd)
		}
	}
	c := &Cluster{o: Options{StateDir: "/state", PodsPerNode: 110}, pki: pki{dir: "/state/pki"}}
	node := containerNode{ip: "192.0.2.2", kubeletPort: 10250, health: 10248, cgroupRoot: containerCgroupRoot("/state", 0),
		bridge: containerBridge("/state", 0), podCIDR: "10.253.0.0/24"}
	kc := c.kubeletConfig(dir, node)
	if kc["failCgroupV1"] != false || kc["cgroupDriver"] != "cgroupfs" || kc["staticPodPath"] != "" ||
		kc["containerRuntimeEndpoint"] != "unix:///state/container-nodes/0/containerd/containerd.sock" {
		t.Errorf("kubelet config: %v", kc)
	}
	if len(node.bridge) > 15 {
		t.Errorf("bridge name %q longer than 15 characters", node.bridge)
	}
	b, err := json.Marshal(cniConfig(dir, 0, node))
	if err != nil || !strings.Contains(string(b), `"subnet":"10.253.0.0/24"`) || !strings.Contains(string(b), `"type":"portmap"`) {
		t.Errorf("CNI config: %s (%v)", b, err)
	}
	if got := unescapeMount(`/a\040b`); got != "/a b" {
		t.Errorf("unescapeMount: %q", got)
	}
}
