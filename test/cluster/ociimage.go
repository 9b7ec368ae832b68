package cluster

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// OCI image archives without a container engine: WriteImageArchive packs one
// static binary as a single-layer image in an OCI image layout tarball
// (oci-layout, index.json, blobs/sha256/...), the format `ctr images import`
// reads. The image name is in the index's io.containerd.image.name
// annotation, so the import needs no --base-name.

// PauseImage is the sandbox image of the container nodes (cmd/pause), imported
// into each node's containerd before its kubelet starts.
const PauseImage = "registry.trainyard.local/pause:1"

// ImageFile is one file of an image's only layer.
type ImageFile struct {
	Path string // inside the image, e.g. "/hello"
	Data []byte
	Mode int64 // e.g. 0o755
}

// WriteImageArchive writes an OCI image layout tarball to path: one layer with
// files, and a config with entrypoint (run by the image unless a pod gives a
// command) for linux on this machine's architecture.
func WriteImageArchive(path, name string, entrypoint []string, files ...ImageFile) error {
	// The layer: a gzipped tar; the config names the digest of the uncompressed tar.
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	dirs := map[string]bool{}
	for _, f := range files {
		p := strings.TrimPrefix(filepath.Clean(f.Path), "/")
		for d := filepath.Dir(p); d != "." && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755}); err != nil {
				return err
			}
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: f.Mode, Size: int64(len(f.Data))}); err != nil {
			return err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}

	blobs := map[string][]byte{} // digest -> content
	put := func(b []byte) string {
		d := digest(b)
		blobs[d] = b
		return d
	}
	type descriptor struct {
		MediaType   string            `json:"mediaType"`
		Digest      string            `json:"digest"`
		Size        int               `json:"size"`
		Annotations map[string]string `json:"annotations,omitempty"`
		Platform    map[string]string `json:"platform,omitempty"`
	}
	platform := map[string]string{"architecture": runtime.GOARCH, "os": "linux"}
	config, err := json.Marshal(map[string]interface{}{
		"architecture": runtime.GOARCH, "os": "linux",
		"config": map[string]interface{}{"Entrypoint": entrypoint, "Env": []string{"PATH=/"}},
		"rootfs": map[string]interface{}{"type": "layers", "diff_ids": []string{digest(raw.Bytes())}},
	})
	if err != nil {
		return err
	}
	manifest, err := json.Marshal(map[string]interface{}{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        descriptor{MediaType: "application/vnd.oci.image.config.v1+json", Digest: put(config), Size: len(config)},
		"layers":        []descriptor{{MediaType: "application/vnd.oci.image.layer.v1.tar+gzip", Digest: put(gz.Bytes()), Size: gz.Len()}},
	})
	if err != nil {
		return err
	}
	index, err := json.Marshal(map[string]interface{}{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.index.v1+json",
		"manifests": []descriptor{{
			MediaType: "application/vnd.oci.image.manifest.v1+json", Digest: put(manifest), Size: len(manifest),
			Annotations: map[string]string{"io.containerd.image.name": name}, Platform: platform,
		}},
	})
	if err != nil {
		return err
	}

	out, err := os.Create(path)
	if err != nil {
		return err
	}
	aw := tar.NewWriter(out)
	add := func(name string, b []byte) error {
		if err := aw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(b))}); err != nil {
			return err
		}
		_, err := aw.Write(b)
		return err
	}
	werr := add("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`))
	for d, b := range blobs {
		if werr == nil {
			werr = add("blobs/sha256/"+strings.TrimPrefix(d, "sha256:"), b)
		}
	}
	if werr == nil {
		werr = add("index.json", index)
	}
	if werr == nil {
		werr = aw.Close()
	}
	if cerr := out.Close(); werr == nil {
		werr = cerr
	}
	return werr
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// BuildStaticBinary builds a main package of the trainyard module (pkg, e.g.
// "./test/cluster/cmd/pause") as a static binary at out.
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
