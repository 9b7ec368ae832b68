package images

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/pem"
	"io"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// The nonroot user and group of distroless, which USER 65532:65532 names.
const (
	nonrootUID = 65532
	nonrootGID = 65532
)

// entry is one file or directory of a layer.
type entry struct {
	name     string // without a leading slash; directories end in "/"
	mode     int64
	uid, gid int
	data     []byte
	file     string // read from this path instead of data
}

// baseFiles are the files of gcr.io/distroless/static:nonroot that Trainyard's
// binaries use: the users (so that 65532 has a name and a home), the name
// service order the Go resolver reads, the CA certificates the initializer
// needs for https://, /tmp and the home directory. Not included: time zone
// data and the dpkg status files of distroless.
func baseFiles() []entry {
	return []entry{
		{name: "etc/", mode: 0o755},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n")},
		{name: "etc/nsswitch.conf", mode: 0o644, data: []byte("hosts: files dns\n")},
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\n" +
			"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
			"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "etc/ssl/", mode: 0o755},
		{name: "etc/ssl/certs/", mode: 0o755},
		{name: CABundle[1:], mode: 0o644, data: caBundle()},
		{name: "home/", mode: 0o755},
		{name: "home/nonroot/", mode: 0o700, uid: nonrootUID, gid: nonrootGID},
		{name: "tmp/", mode: 0o1777},
	}
}

// caBundle is the PEM bundle of the Mozilla (NSS) roots in
// golang.org/x/crypto/x509roots/fallback/bundle: a module pinned by go.sum, so
// the bundle, and the image, are the same on every machine, unlike the host's
// /etc/ssl/certs. Roots that NSS trusts only with a constraint (certificates
// issued before a distrust-after date) are left out: a PEM file cannot say
// so, and a client reading it would trust them without the constraint.
func caBundle() []byte {
	var b bytes.Buffer
	for root := range bundle.Roots() {
		if root.Constraint != nil {
			continue
		}
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: root.Certificate})
	}
	return b.Bytes()
}

// baseLayer is the layer of baseFiles.
func baseLayer(created time.Time) (v1.Layer, error) {
	return layer(baseFiles(), created)
}

// binaryLayer holds one binary at /<name>, owned by root, mode 0755, as
// COPY --from=builder puts it.
func binaryLayer(name, path string, created time.Time) (v1.Layer, error) {
	return layer([]entry{{name: name, mode: 0o755, file: path}}, created)
}

// layer writes the entries into a tar, every time set to created, and makes it
// an OCI layer gzipped once (WithCompressedCaching) at the default level.
func layer(entries []entry, created time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: created}
		data := e.data
		if e.file != "" {
			var err error
			if data, err = os.ReadFile(e.file); err != nil {
				return nil, err
			}
		}
		if e.name[len(e.name)-1] == '/' {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	raw := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil },
		tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.DefaultCompression),
		tarball.WithCompressedCaching)
}
